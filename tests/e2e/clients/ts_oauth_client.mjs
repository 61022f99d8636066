// The TypeScript SDK v2 client (`@modelcontextprotocol/client`) with its ClientCredentialsProvider, pinned to
// 2026-07-28, through the proxy: 401 → the proxy's protected-resource metadata → the authorization server's
// metadata → a client_credentials token for the resource → `whoami` and the eliciting `ask_name` (answered
// "Alice" through MRTR rounds, which the client fulfils by itself). Run with Node 22 from .peers:
//
//   node ts_oauth_client.mjs URL ISSUER CLIENT_ID CLIENT_SECRET
//
// Output: {"whoami": str, "ask_name": str, "wire": [{http, url, status}]} or {"error": str, "wire": […]}.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peersDir = process.env.MRTR_PEERS_DIR || path.resolve(import.meta.dirname, '../../../.peers');
const pkgDir = path.join(peersDir, 'node', 'node_modules', '@modelcontextprotocol', 'client');
const { Client, StreamableHTTPClientTransport, ClientCredentialsProvider } = await import(
  pathToFileURL(path.join(pkgDir, 'dist', 'index.mjs')).href
);

const [url, issuer, clientId, clientSecret] = process.argv.slice(2);
const wire = [];
async function recordingFetch(input, init) {
  const response = await fetch(input, init);
  const where = new URL(typeof input === 'string' ? input : input.url ?? String(input));
  wire.push({ http: init?.method || 'GET', url: `${where.origin}${where.pathname}`, status: response.status });
  return response;
}

const client = new Client(
  { name: 'mrtr-oauth-ts-client', version: '1' },
  { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Alice' } }));

const provider = new ClientCredentialsProvider({ clientId, clientSecret, expectedIssuer: issuer });
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch });
const out = { wire };
const text = result => (result.content ?? []).map(c => c.text ?? '').join('\n');
try {
  await client.connect(transport, { timeout: 15_000 });
  out.whoami = text(await client.callTool({ name: 'whoami', arguments: {} }, { timeout: 30_000 }));
  out.ask_name = text(await client.callTool({ name: 'ask_name', arguments: {} }, { timeout: 30_000 }));
} catch (err) {
  out.error = `${err?.constructor?.name ?? 'Error'}: ${err?.message ?? err}`; // reported, not raised
} finally {
  await Promise.race([client.close().catch(() => {}), new Promise(resolve => setTimeout(resolve, 3000))]);
}
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
