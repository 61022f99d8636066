// Drives a tool call as a task with the TypeScript Tasks client, `@modelcontextprotocol/ext-tasks` (requester
// side: `withTasks`), over the 2026-07-28 wire, and prints one JSON object. Run with Node 22 from .peers (the
// package resolves from .peers/node/node_modules, imported by absolute path; $MRTR_PEERS_DIR moves it):
//
//   node ts_tasks_client.mjs URL TOOL ARGS_JSON [cancel_after_ms]
//
// ext-tasks drives the whole task by itself: it sees `resultType: "task"`, polls tasks/get, hands each
// `inputRequests` entry of an input_required task to the application input handler below (elicitation →
// accept {name: "Tess"}), sends the answers with tasks/update, and settles on the terminal status. With
// cancel_after_ms it calls `execution.cancel()` (tasks/cancel) that long after the task exists.
// Its SDK adapter needs "rawDispatch" and "v2RequestFraming" for a 2026-07-28 server; this script gives it a
// session port of its own instead: a fetch per request with the 2026-07-28 headers and `_meta` framing.
// Output: {"kind", "statuses": [task statuses in order], "outcome", "text"?, "error"?, "inputs": [contexts],
//          "wire": [JSON-RPC methods sent, in order]}

import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peersDir = process.env.MRTR_PEERS_DIR || path.resolve(import.meta.dirname, '../../../.peers');
const entry = path.join(peersDir, 'node', 'node_modules', '@modelcontextprotocol', 'ext-tasks', 'dist', 'client', 'index.js');
const { withTasks, createApplicationInputHandler } = await import(pathToFileURL(entry).href);

const [url, tool, argsJson, cancelAfter] = process.argv.slice(2);
const VERSION = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const wire = [];
const inputs = [];
let nextId = 1;

const NAME_FIELD = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' };

function frame(request) {
  const params = request.params ?? {};
  const meta = params._meta ?? {};
  const declared = meta['io.modelcontextprotocol/clientCapabilities'] ?? {};
  return {
    jsonrpc: '2.0',
    id: nextId++,
    method: request.method,
    params: {
      ...params,
      _meta: {
        ...meta,
        'io.modelcontextprotocol/protocolVersion': VERSION,
        'io.modelcontextprotocol/clientInfo': { name: 'ext-tasks-driver', version: '1' },
        'io.modelcontextprotocol/clientCapabilities': {
          ...declared,
          elicitation: { form: {} },
          extensions: { ...(declared.extensions ?? {}), [TASKS]: {} },
        },
      },
    },
  };
}

async function post(body) {
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': VERSION,
    'Mcp-Method': body.method,
  };
  const name = body.params[NAME_FIELD[body.method]];
  if (typeof name === 'string') headers['Mcp-Name'] = name;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await response.text();
  if ((response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const messages = text.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean).map((d) => JSON.parse(d));
    return messages.find((m) => m.id === body.id);
  }
  return JSON.parse(text);
}

const port = {
  endpointId: 'mrtr-proxy-e2e',
  taskCapabilities: { generation: 'v2', capabilities: {} },
  invalidated: false,
  async dispatch(request) {
    const body = frame(request);
    wire.push(body.method);
    const reply = await post(body);
    if (reply === undefined) throw new Error(`no answer to ${body.method}`);
    return 'error' in reply ? { kind: 'error', error: reply.error } : { kind: 'result', result: reply.result };
  },
  onServerRequest: () => () => {},
  onNotification: () => () => {},
  onInvalidated: () => () => {},
};

const onInputRequest = createApplicationInputHandler({
  elicitation: async (request, context) => {
    inputs.push({ kind: request.kind, scope: context.scope, delivery: context.delivery, inputId: context.inputId });
    return { action: 'accept', content: { name: 'Tess' } };
  },
  sampling: async () => { throw new Error('no sampling here'); },
  roots: async () => ({ roots: [] }),
});

const session = withTasks(port, { onInputRequest });
const statuses = [];
const out = { inputs, statuses, wire };
try {
  const execution = await session.callTool(tool, JSON.parse(argsJson));
  out.kind = execution.kind;
  if (cancelAfter !== undefined) {
    setTimeout(() => { execution.cancel().catch((e) => { out.cancelError = String(e); }); }, Number(cancelAfter));
  }
  const { outcome } = await execution.settle({
    onEvent: (event) => { if (event.type === 'task' && statuses.at(-1) !== event.task.status) statuses.push(event.task.status); },
  });
  out.outcome = outcome.status;
  if (outcome.status === 'completed') out.text = outcome.result.content?.[0]?.text;
  if (outcome.status === 'failed') out.error = String(outcome.error);
} catch (error) {
  out.error = String(error?.stack ?? error);
} finally {
  await session.close?.();
}
console.log(JSON.stringify(out));
