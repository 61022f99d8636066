// Drives the TypeScript SDK v2 client (`@modelcontextprotocol/client`, pinned in tests/fixtures/npm/package.json)
// through a plan of calls and prints one JSON object. Run with Node 22 from .peers (the package resolves from
// .peers/node/node_modules — ESM ignores NODE_PATH, so it is imported by absolute path; $MRTR_PEERS_DIR moves it):
//
//   node ts_client.mjs URL MODE PLAN_JSON         MODE: "pinned" ({pin: "2026-07-28"}) | "auto" | "legacy"
//
// PLAN_JSON: [{"id": "a", "kind": "tool"|"prompt"|"resource"|"list_tools"|"list_tools_all", "name": …, "args": {…},
//              "elicit": "accept"|"decline"|"cancel"}]
// Env: MRTR_ROOT_URI (default file:///work/project) is the one root the roots/list handler returns.
// MRTR_LIST_CHANGED=1 gives the client ClientOptions.listChanged for tools (off by default: on a modern
// connection it opens a subscriptions/listen of its own); the step kind "list_changed" then calls the tool
// `name` with {name: args.name + "_" + N} (N = 0, 1, …, at most 10 times, 2 s apart) until the handler
// reports a refreshed tool list, and answers that list's names.
// Output: {"client": {name, version, mode, era, protocolVersion}, "steps": {id: {text, is_error, seen} |
//          {error, seen}}, "wire": [{http, method, status, contentType, resultType?, retry?}]}
//
// The client fulfils `input_required` by itself (ClientOptions.inputRequired.autoFulfill, default true): it
// dispatches each inputRequests entry to the handler registered for its method and retries the original
// request with inputResponses + the echoed requestState on a new JSON-RPC id. `seen` lists the handler calls;
// `wire` records every HTTP exchange (from a fetch wrapper), so a test can see the retries on the wire.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peersDir = process.env.MRTR_PEERS_DIR || path.resolve(import.meta.dirname, '../../../.peers');
const pkgDir = path.join(peersDir, 'node', 'node_modules', '@modelcontextprotocol', 'client');
const { Client, StreamableHTTPClientTransport } = await import(pathToFileURL(path.join(pkgDir, 'dist', 'index.mjs')).href);
const clientPkg = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));

const [url, mode, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const MODES = { pinned: { pin: '2026-07-28' }, auto: 'auto', legacy: 'legacy' };
if (!(mode in MODES)) throw new Error(`mode must be one of ${Object.keys(MODES)}`);

const ROOT_URI = process.env.MRTR_ROOT_URI || 'file:///work/project'; // what roots/list is answered with
const behaviour = { elicit: 'accept' };
const seen = [];
const wire = [];
const logs = []; // notifications/message of the current step
const errors = []; // what the client reported through onerror during the current step
const LOG_LEVEL_META = 'io.modelcontextprotocol/logLevel';
const UNTIL_TRIES = 100; // a step with "until" repeats its call at most this often

// Records each HTTP exchange: the JSON-RPC method sent, the status, and the resultType of a JSON-RPC result
// (read from a clone of the body, so the SDK still gets the stream).
async function recordingFetch(input, init) {
  let sent = {};
  try {
    sent = typeof init?.body === 'string' ? JSON.parse(init.body) : {};
  } catch {
    sent = {};
  }
  const method = init?.method || 'GET';
  const response = await fetch(input, init);
  const row = {
    http: method,
    method: sent.method ?? (sent.result || sent.error ? 'response' : undefined),
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
  };
  if (sent.params?.requestState !== undefined) row.retry = Object.keys(sent.params.inputResponses ?? {});
  wire.push(row);
  if (method === 'POST' && response.ok && sent.id !== undefined) {
    const clone = response.clone();
    clone
      .text()
      .then(text => {
        const match = text.match(/"resultType"\s*:\s*"([a-z_]+)"/);
        if (match) row.resultType = match[1];
        const err = text.match(/"error"\s*:\s*\{[^}]*"code"\s*:\s*(-?\d+)/);
        if (err) row.errorCode = Number(err[1]);
      })
      .catch(() => {});
  }
  return response;
}

const changed = []; // what the listChanged handler got: tool names, or the error it reported
function onChanged(error, tools) {
  changed.push(error ? { error: String(error?.message ?? error) } : (tools ?? []).map(t => t.name));
}

const client = new Client(
  { name: 'mrtr-interop-ts-client', version: clientPkg.version },
  {
    capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: { listChanged: true } },
    versionNegotiation: { mode: MODES[mode] },
    inputRequired: { autoFulfill: true, maxRounds: 10 },
    ...(process.env.MRTR_LIST_CHANGED === '1' ? { listChanged: { tools: { debounceMs: 0, onChanged } } } : {}),
  },
);

client.setRequestHandler('elicitation/create', async request => {
  const params = request.params ?? {};
  const elicitMode = params.mode ?? 'form';
  seen.push(`elicit:${elicitMode}`);
  if (behaviour.elicit !== 'accept') return { action: behaviour.elicit };
  if (elicitMode === 'url') return { action: 'accept' };
  const content = {};
  for (const [name, spec] of Object.entries(params.requestedSchema?.properties ?? {})) {
    if (spec?.type === 'boolean') content[name] = true;
    else if (spec?.type === 'number' || spec?.type === 'integer') content[name] = 1;
    else if (Array.isArray(spec?.enum)) content[name] = spec.enum[0];
    else if (Array.isArray(spec?.oneOf)) content[name] = spec.oneOf[0]?.const;
    else if (spec?.type === 'array') {
      // A multi-select: its first option (the proxy checks minItems).
      const options = spec.items?.enum ?? (spec.items?.anyOf ?? []).map(o => o?.const);
      content[name] = options.slice(0, 1);
    }
    else content[name] = { name: 'Alice', color: 'green', email: 'alice@example.com' }[name] ?? 'x';
  }
  // Drop optional fields we could not fill sensibly (e.g. format-restricted strings other than email).
  const required = new Set(params.requestedSchema?.required ?? []);
  for (const [name, spec] of Object.entries(params.requestedSchema?.properties ?? {})) {
    if (!required.has(name) && spec?.format && spec.format !== 'email') delete content[name];
  }
  return { action: 'accept', content };
});

client.setRequestHandler('sampling/createMessage', async () => {
  seen.push('sample');
  return { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'test-model', stopReason: 'endTurn' };
});

client.setNotificationHandler('notifications/message', notification => {
  logs.push({ level: notification.params.level, data: notification.params.data });
});
client.onerror = err => errors.push(String(err?.message ?? err));

client.setRequestHandler('roots/list', async () => {
  seen.push('roots');
  return { roots: [{ uri: ROOT_URI, name: 'project' }] };
});

function textOf(items) {
  return items
    .map(item => item?.text ?? item?.content?.text ?? item?.resource?.text ?? JSON.stringify(item))
    .join('\n');
}

async function runStep(step) {
  behaviour.elicit = step.elicit ?? 'accept';
  const args = step.args ?? {};
  const opts = { timeout: 30_000 };
  switch (step.kind) {
    case 'tool': {
      // "progress": report what onprogress saw; "log_level": opt in (its messages in "logs"); "until":
      // repeat (bounded, 50 ms apart) until the text contains that fragment.
      const progress = [];
      const params = { name: step.name, arguments: args };
      if (step.log_level) params._meta = { [LOG_LEVEL_META]: step.log_level };
      // The client reports its own MRTR rounds through onprogress too ("Fulfilling input required by
      // 'tools/call' (round N)", no total): those are not the server's, so they are left out.
      const onprogress = p => {
        if (!/^Fulfilling input required by /.test(p.message ?? '')) progress.push([p.progress, p.total, p.message]);
      };
      const callOpts = step.progress ? { ...opts, onprogress } : opts;
      logs.length = 0;
      errors.length = 0;
      let result;
      for (let i = 0; i < (step.until ? UNTIL_TRIES : 1); i++) {
        progress.length = 0;
        result = await client.callTool(params, callOpts);
        if (!step.until || textOf(result.content ?? []).includes(step.until)) break;
        await new Promise(resolve => setTimeout(resolve, 50));
      }
      const out = { text: textOf(result.content ?? []), is_error: Boolean(result.isError) };
      if (step.progress) out.progress = progress;
      if (step.log_level) out.logs = [...logs];
      if (errors.length) out.client_errors = [...errors];
      return out;
    }
    case 'prompt': {
      const result = await client.getPrompt({ name: step.name, arguments: args }, opts);
      return { text: textOf(result.messages ?? []), is_error: false };
    }
    case 'resource': {
      const result = await client.readResource({ uri: step.name }, { ...opts, cacheMode: 'bypass' });
      return { text: (result.contents ?? []).map(c => c.text ?? '').join('\n'), is_error: false };
    }
    case 'list_tools': {
      const result = await client.listTools(undefined, opts);
      return { text: result.tools.map(t => t.name).sort().join(','), is_error: false };
    }
    case 'list_tools_all': {
      // Every page, following nextCursor (bounded): the names in the order the server listed them.
      const names = [];
      let cursor;
      let pages = 0;
      do {
        const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { ...opts, cacheMode: 'bypass' });
        names.push(...result.tools.map(t => t.name));
        cursor = result.nextCursor;
        pages += 1;
      } while (cursor && pages < 100);
      return { text: names.join(','), pages, is_error: false };
    }
    case 'list_changed': {
      const before = changed.length;
      for (let i = 0; i < 10 && changed.length === before; i++) {
        await client.callTool({ name: step.name, arguments: { name: `${args.name}_${i}` } }, opts);
        for (let waited = 0; waited < 2000 && changed.length === before; waited += 50) {
          await new Promise(resolve => setTimeout(resolve, 50));
        }
      }
      const got = changed.at(-1);
      if (changed.length === before) return { text: '', is_error: true };
      return Array.isArray(got) ? { text: got.join(','), is_error: false } : { ...got, is_error: true };
    }
    default:
      throw new Error(`unknown step kind ${step.kind}`);
  }
}

const out = { client: { name: '@modelcontextprotocol/client', version: clientPkg.version, mode }, steps: {}, wire };
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
try {
  await client.connect(transport, { timeout: 15_000 });
  out.client.era = client.getProtocolEra();
  out.client.protocolVersion = client.getNegotiatedProtocolVersion();
  for (const step of plan) {
    seen.length = 0;
    try {
      out.steps[step.id] = await runStep(step);
    } catch (err) {
      out.steps[step.id] = { error: `${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}` };
      if (err?.code !== undefined) out.steps[step.id].code = err.code;
    }
    out.steps[step.id].seen = [...seen];
  }
} catch (err) {
  out.connectError = `${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}`; // reported, not raised
} finally {
  await Promise.race([client.close().catch(() => {}), new Promise(resolve => setTimeout(resolve, 3000))]);
}
// Exit once the output is flushed: a lingering keep-alive socket must not keep the process alive.
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
