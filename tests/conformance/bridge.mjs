// Serves 2026-07-28 (stateless) MCP requests over HTTP by relaying each one to a single,
// long-lived forkpoint process on its stdin/stdout.
//
//   node bridge.mjs --port P [--verbose] -- COMMAND [ARGS...]
//
// Why not supergateway: its 2026-07-28 path starts a fresh server process for every request,
// so a task created by one request could never be seen by the next (and forkpoint keeps one
// process per state dir).  The conformance suite's stateless client sends every request as
// its own POST; here they all reach the same forkpoint, which answers them on one stdio
// connection.  Request ids are rewritten ("bridge-N") so requests from different clients
// cannot collide, and rewritten back in the response.
//
// What is relayed, and how:
// - A request answers as plain JSON when forkpoint sends nothing else for it first.  When the
//   client accepts text/event-stream and forkpoint writes a notification or a request for it
//   before the response, the answer becomes an SSE stream: those messages, then the response,
//   then the end of the stream (the streamable HTTP transport's POST response stream).
// - Server-to-client notifications are routed by what they carry: a progressToken to the open
//   request that sent that token; anything else (notifications/message, …) to every open
//   stream-capable request, since a stdio server has no other way to say which request a
//   message belongs to.  A message with no open stream-capable request to go to (none open,
//   or the client accepts only application/json) is logged (--verbose) and dropped.
// - Server-to-client requests (a 2026-07-28 server must not send any; the suite checks that)
//   go the same way as unroutable notifications, ids unchanged; the client's JSON-RPC
//   response to one (a POST without a method) is relayed to forkpoint as it is.
// - Client-to-server notifications are relayed; notifications/cancelled gets the relayed id of
//   the request it names (the newest open one with that client id).
// - A client that goes away before the answer cancels its request (notifications/cancelled).
//
// The HTTP layer: requests without _meta["io.modelcontextprotocol/protocolVersion"] are
// refused here with -32602 and HTTP 400, as a stateless HTTP endpoint must: forkpoint is a
// dual-era stdio server and would take them for an initialize-based session (those go through
// supergateway --stateful instead).  JSON-RPC errors get the HTTP status the 2026-07-28
// transport gives them.  MCP-Protocol-Version / Mcp-Method / Mcp-Name headers are not checked
// (a test harness, not a transport forkpoint ships).
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

const PV = 'io.modelcontextprotocol/protocolVersion';
const CC = 'io.modelcontextprotocol/clientCapabilities';
const child = spawn(cmd, cmdArgs, { stdio: ['pipe', 'pipe', 'inherit'] });
// relayed id -> { res, id, token, sse, metaBad }; in insertion (= arrival) order
const waiting = new Map();
let nextId = 1;
let stopping = false;

// The HTTP status a stateless server gives each JSON-RPC error (SEP-2575 / SEP-2243): 404 for
// an unknown method, 400 for header/version/capability errors and for a request whose
// required _meta is missing (metaBad), else 200.
function httpStatus(msg, metaBad) {
	const code = msg.error?.code;
	if (code === undefined) return 200;
	if (code === -32601) return 404;
	if (code === -32020 || code === -32021 || code === -32022) return 400;
	if (code === -32602 && metaBad) return 400;
	return 200;
}

function send(res, status, body) {
	if (res.writableEnded) return;
	res.writeHead(status, { 'Content-Type': 'application/json' });
	res.end(JSON.stringify(body));
}

// One message on a request's SSE stream, opening the stream on first use.
function sseWrite(w, msg) {
	if (w.res.writableEnded) return;
	if (!w.res.headersSent)
		w.res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
	w.res.write(`event: message\ndata: ${JSON.stringify(msg)}\n\n`);
}

// Where a server-to-client notification or request goes: the open requests it belongs to.
function targets(msg) {
	const token = msg.params?.progressToken;
	if (msg.method === 'notifications/progress' && token !== undefined) {
		const key = JSON.stringify(token);
		return [...waiting.values()].filter((w) => w.token === key);
	}
	return [...waiting.values()].filter((w) => w.sse);
}

function fromServer(line) {
	let msg;
	try {
		msg = JSON.parse(line);
	} catch {
		process.stderr.write(`bridge: forkpoint wrote a line that is not JSON: ${line.slice(0, 200)}\n`);
		return;
	}
	if (typeof msg?.method === 'string') {
		const to = targets(msg).filter((w) => w.sse);
		log(to.length ? `=> ${to.length}` : 'dropped (no open request for it)', line.slice(0, 300));
		for (const w of to) sseWrite(w, msg);
		return;
	}
	const w = waiting.get(msg?.id);
	if (!w) {
		log('dropped (answers no open request)', line.slice(0, 300));
		return;
	}
	waiting.delete(msg.id);
	log('<-', line.slice(0, 300));
	const out = { ...msg, id: w.id };
	if (w.res.headersSent) {
		sseWrite(w, out);
		w.res.end();
	} else {
		send(w.res, httpStatus(msg, w.metaBad), out);
	}
}

readline.createInterface({ input: child.stdout }).on('line', fromServer);

child.on('exit', (code, signal) => {
	for (const w of waiting.values()) {
		const err = { jsonrpc: '2.0', id: w.id, error: { code: -32603, message: 'forkpoint exited' } };
		if (w.res.headersSent) {
			sseWrite(w, err);
			w.res.end();
		} else {
			send(w.res, 502, err);
		}
	}
	waiting.clear();
	if (!stopping) {
		process.stderr.write(`bridge: forkpoint exited (code ${code}, signal ${signal})\n`);
		process.exit(1);
	}
	process.exit(0);
});

function toServer(msg) {
	const line = JSON.stringify(msg);
	log('->', line.slice(0, 300));
	child.stdin.write(`${line}\n`);
}

// A notification or a JSON-RPC response from the client: relayed, 202.
function relayOneWay(msg, res) {
	if (msg.method === 'notifications/cancelled' && msg.params && 'requestId' in msg.params) {
		const rid = [...waiting].reverse().find(([, w]) => w.id === msg.params.requestId)?.[0];
		if (rid !== undefined) msg = { ...msg, params: { ...msg.params, requestId: rid } };
	}
	toServer(msg);
	res.writeHead(202).end();
}

function relayRequest(req, msg, res) {
	const meta = msg.params?._meta;
	if (meta?.[PV] === undefined) {
		send(res, 400, {
			jsonrpc: '2.0', id: msg.id,
			error: { code: -32602, message: `Invalid params: _meta["${PV}"] is required on this stateless endpoint` },
		});
		return;
	}
	const rid = `bridge-${nextId++}`;
	const token = meta.progressToken;
	waiting.set(rid, {
		res, id: msg.id,
		token: token === undefined ? undefined : JSON.stringify(token),
		sse: /text\/event-stream/.test(req.headers.accept ?? ''),
		metaBad: typeof meta[CC] !== 'object' || meta[CC] === null,
	});
	// A client that gives up is a cancelled request for forkpoint.
	res.on('close', () => {
		if (waiting.delete(rid))
			toServer({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: rid } });
	});
	toServer({ ...msg, id: rid });
}

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
		const isObj = msg && typeof msg === 'object' && !Array.isArray(msg);
		const isResponse = isObj && !('method' in msg) && 'id' in msg && ('result' in msg || 'error' in msg);
		if (!isObj || (!isResponse && typeof msg.method !== 'string')) {
			send(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request' } });
			return;
		}
		if (isResponse || !('id' in msg)) relayOneWay(msg, res);
		else relayRequest(req, msg, res);
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
