"""`pyread`: the example project-read tool in Python (componentize-py), exporting `bb7:tool/tool`.

Arguments: {"path": "<file relative to the project root>"}. Result: {"path", "bytes", "text"}
(at most 64 KiB of text). The project's read-only view is mounted at `/`: files the view leaves out
(`.git/`, `.env`, ignored files) are simply not there.

Build: componentize-py -d ../../../wit/v0.1.0 -w tool-component componentize app -o python_read.wasm
"""

import json
import os

from wit_world import exports
from wit_world.imports import types
from componentize_py_types import Err

MAX_TEXT = 64 << 10

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "A text file relative to the project root, e.g. \"README.md\".",
            }
        },
        "required": ["path"],
        "additionalProperties": False,
    }
)


def fail(kind, message):
    """A tool error: `kind` is one of the contract's error kinds, `message` goes to the model."""
    return Err(types.ToolError(kind=kind, message=message))


class Tool(exports.Tool):
    def describe(self, settings):
        return types.ToolInfo(
            name="read_text",
            description="Reads a text file of the project (at most 64 KiB), by its path relative "
            "to the project root.",
            parameters_schema=SCHEMA,
        )

    def call(self, settings, arguments):
        try:
            args = json.loads(arguments)
        except ValueError as e:
            raise fail(types.ErrorKind.INVALID_ARGUMENTS, f"arguments are not JSON: {e}")
        path = args.get("path") if isinstance(args, dict) else None
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
            raise fail(types.ErrorKind.INVALID_ARGUMENTS, "path must be a relative path inside the project")
        full = os.path.join("/", path)
        try:
            with open(full, "rb") as f:
                data = f.read(MAX_TEXT + 1)
        except FileNotFoundError:
            raise fail(types.ErrorKind.NOT_FOUND, f"{path} does not exist in the project")
        except IsADirectoryError:
            raise fail(types.ErrorKind.INVALID_ARGUMENTS, f"{path} is a directory")
        except PermissionError:
            raise fail(types.ErrorKind.PERMISSION_DENIED, f"{path} cannot be read")
        except OSError as e:
            raise fail(types.ErrorKind.IO, f"{path}: {e}")
        if len(data) > MAX_TEXT:
            raise fail(types.ErrorKind.TOO_LARGE, f"{path} is larger than 64 KiB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise fail(types.ErrorKind.NOT_TEXT, f"{path} is not UTF-8 text")
        return json.dumps({"path": path, "bytes": len(data), "text": text})
