//! Project walking, search, read and list (AGENT-PLAN.md §1). Being written.
