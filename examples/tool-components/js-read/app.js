// `jsread`: the example project-read tool in JavaScript (jco / componentize-js), exporting
// `bb7:tool/tool`. Same tool as the Python example: {"path"} -> {"path", "bytes", "text"}.
// The project's read-only view is the one preopened directory (mounted at `/`).
import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';

const MAX_TEXT = 64 * 1024;

const SCHEMA = JSON.stringify({
  type: 'object',
  properties: {
    path: {
      type: 'string',
      description: 'A text file relative to the project root, e.g. "README.md".',
    },
  },
  required: ['path'],
  additionalProperties: false,
});

// A tool error: thrown from an export returning `result<_, tool-error>`, it becomes the `err`.
function fail(kind, message) {
  return { kind, message };
}

// wasi:filesystem error codes -> the contract's error kinds.
function kindOf(code) {
  switch (code) {
    case 'no-entry':
      return 'not-found';
    case 'access':
    case 'not-permitted':
      return 'permission-denied';
    case 'is-directory':
      return 'invalid-arguments';
    default:
      return 'io';
  }
}

export const tool = {
  describe(_settings) {
    return {
      name: 'read_text',
      description:
        'Reads a text file of the project (at most 64 KiB), by its path relative to the project root.',
      parametersSchema: SCHEMA,
    };
  },

  call(_settings, argumentsJson) {
    let args;
    try {
      args = JSON.parse(argumentsJson);
    } catch (e) {
      throw fail('invalid-arguments', `arguments are not JSON: ${e}`);
    }
    const path = args && typeof args === 'object' ? args.path : undefined;
    if (typeof path !== 'string' || path === '' || path.startsWith('/') || path.split('/').includes('..')) {
      throw fail('invalid-arguments', 'path must be a relative path inside the project');
    }
    const dirs = getDirectories();
    if (dirs.length === 0) {
      throw fail('permission-denied', 'no project directory was granted');
    }
    const root = dirs[0][0];
    let data;
    try {
      const file = root.openAt({ symlinkFollow: false }, path, {}, { read: true });
      const [bytes] = file.read(BigInt(MAX_TEXT + 1), 0n);
      data = bytes;
    } catch (e) {
      const code = e && e.payload !== undefined ? e.payload : String(e);
      throw fail(kindOf(code), `${path}: ${code}`);
    }
    if (data.length > MAX_TEXT) {
      throw fail('too-large', `${path} is larger than 64 KiB`);
    }
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(data);
    } catch (_e) {
      throw fail('not-text', `${path} is not UTF-8 text`);
    }
    return JSON.stringify({ path, bytes: data.length, text });
  },
};
