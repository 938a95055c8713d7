--- The host's side of per-hunk review and checkpoints (`:BB7Review`, `:BB7Checkpoints`): each function
--- returns the host's reply (`type = "error"` on failure) and leaves the wording to the view.
local host = require("bb7.host")

local M = {}

--- The hunks of `path`'s output against the local file (`hunks`, `base_hash`).
function M.get_hunks(path)
  return host.call("get_hunks", { path = path })
end

--- The output (proposed) content of `path`.
function M.output_file(path)
  return host.call("get_output_file", { path = path })
end

--- Writes hunks `ids` of `path`'s output into the local file; refused ("Conflict: …") when the file
--- no longer matches `base_hash`. The reply has the new `content` and how many hunks `remaining`.
function M.apply_hunks(path, ids, base_hash)
  return host.call("apply_hunks", { path = path, hunk_ids = ids, base_hash = base_hash })
end

--- Drops hunks `ids` from `path`'s output; the reply says how many hunks `remaining`.
function M.reject_hunks(path, ids)
  return host.call("reject_hunks", { path = path, hunk_ids = ids })
end

--- The project's checkpoints, newest first (`checkpoints`).
function M.checkpoints()
  return host.call("checkpoint_list", {})
end

--- The 3-way view of `path` in checkpoint `id`: `base`, `current`, `proposed` and the `hunks`.
function M.checkpoint_diff3(id, path)
  return host.call("checkpoint_diff3", { checkpoint_id = id, path = path })
end

--- Restores every file of checkpoint `id` to its content before that apply.
function M.rollback_hard(id)
  return host.call("checkpoint_rollback", { checkpoint_id = id, mode = "hard_all" })
end

--- Rolls back hunks `hunk_ids` of checkpoint `id` (hunks whose lines changed since are `conflicts`).
function M.rollback_hunks(id, hunk_ids)
  return host.call("checkpoint_rollback", { checkpoint_id = id, mode = "scoped_selected", hunk_ids = hunk_ids })
end

return M
