// Drives Vercel's AI SDK MCP client (`@ai-sdk/mcp` 2.0.99, pinned in tests/fixtures/npm/package.json) through a
// plan of tool calls and prints one JSON object. Run with Node 22 from .peers:
//
//   node aisdk_client.mjs URL MODE PLAN_JSON      MODE: "modern" (protocolVersionDiscovery: server/discover,
//                                                  2026-07-28) | "legacy" (protocolVersionDiscovery: false:
//                                                  initialize)
//
// PLAN_JSON: [{"id": "a", "kind": "tool", "name": …, "args": {…}, "elicit": "accept"|"decline"|"cancel"}]
// The client answers elicitation itself (onElicitationRequest): inline requests on a legacy connection,
// `input_required` rounds at 2026-07-28 (it retries with inputResponses); every required string field of a
// form is filled as the TS client driver fills it ("Alice" for a name).
// Output: {"client": {name, mode, protocolVersion}, "steps": {id: {text, is_error, seen} | {error, seen}}}

import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peersDir = process.env.MRTR_PEERS_DIR || path.resolve(import.meta.dirname, '../../../.peers');
const pkg = path.join(peersDir, 'node', 'node_modules', '@ai-sdk', 'mcp', 'dist', 'index.js');
const { createMCPClient, ElicitationRequestSchema } = await import(pathToFileURL(pkg).href);

const [url, mode, planJson] = process.argv.slice(2);
if (!['modern', 'legacy'].includes(mode)) throw new Error('mode must be modern or legacy');
const plan = JSON.parse(planJson);
const behaviour = { elicit: 'accept' };
let seen = [];

const client = await createMCPClient({
  transport: { type: 'http', url },
  name: 'aisdk-driver',
  capabilities: { elicitation: {} },
  protocolVersionDiscovery: mode === 'modern',
});
client.onElicitationRequest(ElicitationRequestSchema, async request => {
  seen.push('elicit');
  if (behaviour.elicit !== 'accept') return { action: behaviour.elicit };
  const schema = request.params?.requestedSchema ?? {};
  const content = {};
  // Filled as the TS client's driver fills a form (ts_client.mjs): each field with a value its schema admits.
  for (const [name, spec] of Object.entries(schema.properties ?? {})) {
    if (spec?.type === 'boolean') content[name] = true;
    else if (spec?.type === 'number' || spec?.type === 'integer') content[name] = 1;
    else if (Array.isArray(spec?.enum)) content[name] = spec.enum[0];
    else if (Array.isArray(spec?.oneOf)) content[name] = spec.oneOf[0]?.const;
    else if (spec?.type === 'array') content[name] = (spec.items?.enum ?? (spec.items?.anyOf ?? []).map(o => o?.const)).slice(0, 1);
    else content[name] = { name: 'Alice', color: 'green', email: 'alice@example.com' }[name] ?? 'x';
  }
  const required = new Set(schema.required ?? []);
  for (const [name, spec] of Object.entries(schema.properties ?? {})) {
    if (!required.has(name) && spec?.format && spec.format !== 'email') delete content[name];
  }
  return { action: 'accept', content };
});

const steps = {};
for (const step of plan) {
  behaviour.elicit = step.elicit ?? 'accept';
  seen = [];
  try {
    const result = await client.callTool({ name: step.name, arguments: step.args ?? {} });
    const text = (result.content ?? []).map(c => c.text ?? '').join('\n');
    steps[step.id] = { text, is_error: Boolean(result.isError), seen };
  } catch (e) {
    steps[step.id] = { error: String(e?.message ?? e), seen };
  }
}
const out = { client: { name: 'ai-sdk-mcp', mode, protocolVersion: client.protocolVersion ?? null }, steps };
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
