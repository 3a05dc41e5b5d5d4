// Serves 2026-07-28 (stateless) MCP requests over HTTP by relaying each one to a single,
// long-lived forkpoint process on its stdin/stdout.
//
//   node bridge.mjs --port P [--verbose] -- COMMAND [ARGS...]
//
// Why not supergateway: its 2026-07-28 path starts a fresh server process for every request,
// so a task created by one request could never be seen by the next (and forkpoint keeps one
// process per state dir).  The conformance suite's stateless client sends every request as
// its own POST; here they all reach the same forkpoint, which answers them on one stdio
// connection.  Request ids are rewritten so requests from different clients cannot collide.
//
// Only requests that carry _meta["io.modelcontextprotocol/protocolVersion"] are relayed:
// initialize-based sessions go through supergateway --stateful instead.  The bridge checks
// nothing at the HTTP layer (no Mcp-Method / Mcp-Name header validation): it is a test
// harness, not a transport forkpoint ships.  Server-to-client notifications (progress) are
// dropped, as a plain JSON response has nowhere to put them.
import http from 'node:http';
import { spawn } from 'node:child_process';
import readline from 'node:readline';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
if (sep < 0 || sep === argv.length - 1) {
	process.stderr.write('usage: node bridge.mjs --port P [--verbose] -- COMMAND [ARGS...]\n');
	process.exit(2);
}
const opts = argv.slice(0, sep);
const [cmd, ...cmdArgs] = argv.slice(sep + 1);
const port = Number(opts[opts.indexOf('--port') + 1]);
const verbose = opts.includes('--verbose');
const log = (...a) => { if (verbose) process.stderr.write(`bridge: ${a.join(' ')}\n`); };

const child = spawn(cmd, cmdArgs, { stdio: ['pipe', 'pipe', 'inherit'] });
const waiting = new Map();   // relayed id -> { res, id }
let nextId = 1;
let stopping = false;

// The HTTP status a stateless server gives each JSON-RPC error (SEP-2575 / SEP-2243).
function httpStatus(msg) {
	const code = msg.error?.code;
	if (code === -32601) return 404;
	if (code === -32020 || code === -32021 || code === -32022) return 400;
	return 200;
}

function send(res, status, body) {
	if (res.writableEnded) return;
	res.writeHead(status, { 'Content-Type': 'application/json' });
	res.end(JSON.stringify(body));
}

readline.createInterface({ input: child.stdout }).on('line', (line) => {
	let msg;
	try {
		msg = JSON.parse(line);
	} catch {
		process.stderr.write(`bridge: forkpoint wrote a line that is not JSON: ${line.slice(0, 200)}\n`);
		return;
	}
	const w = 'id' in msg && !('method' in msg) ? waiting.get(msg.id) : undefined;
	if (!w) {
		log('dropped', line.slice(0, 300));
		return;
	}
	waiting.delete(msg.id);
	log('<-', line.slice(0, 300));
	send(w.res, httpStatus(msg), { ...msg, id: w.id });
});

child.on('exit', (code, signal) => {
	for (const w of waiting.values())
		send(w.res, 502, { jsonrpc: '2.0', id: w.id, error: { code: -32603, message: 'forkpoint exited' } });
	waiting.clear();
	if (!stopping) {
		process.stderr.write(`bridge: forkpoint exited (code ${code}, signal ${signal})\n`);
		process.exit(1);
	}
	process.exit(0);
});

const server = http.createServer((req, res) => {
	if (req.method !== 'POST') {
		res.writeHead(405, { Allow: 'POST' }).end();
		return;
	}
	const chunks = [];
	req.on('data', (c) => chunks.push(c));
	req.on('end', () => {
		let msg;
		try {
			msg = JSON.parse(Buffer.concat(chunks).toString('utf8'));
		} catch {
			send(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
			return;
		}
		if (!msg || typeof msg !== 'object' || Array.isArray(msg) || typeof msg.method !== 'string') {
			send(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request' } });
			return;
		}
		if (!('id' in msg)) {
			child.stdin.write(`${JSON.stringify(msg)}\n`);
			res.writeHead(202).end();
			return;
		}
		if (msg.params?._meta?.['io.modelcontextprotocol/protocolVersion'] === undefined) {
			send(res, 400, {
				jsonrpc: '2.0', id: msg.id,
				error: { code: -32600, message: 'This bridge relays only 2026-07-28 requests (with _meta protocolVersion)' },
			});
			return;
		}
		const rid = `bridge-${nextId++}`;
		waiting.set(rid, { res, id: msg.id });
		// A client that gives up is a cancelled request for forkpoint.
		res.on('close', () => {
			if (waiting.delete(rid))
				child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: rid } })}\n`);
		});
		const line = JSON.stringify({ ...msg, id: rid });
		log('->', line.slice(0, 300));
		child.stdin.write(`${line}\n`);
	});
});

function stop() {
	stopping = true;
	server.close();
	child.stdin.end();   // forkpoint exits at the end of its input
	setTimeout(() => child.kill('SIGKILL'), 10000).unref();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

server.listen(port, '127.0.0.1', () => log(`listening on 127.0.0.1:${port}`));
