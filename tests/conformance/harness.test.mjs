// The conformance harness itself: bridge.mjs (what it relays, where to, with which ids and
// HTTP statuses) against testdata/fake-server.mjs, and util.mjs report (verdicts against an
// expected-failures file, per scenario and per check).  run.sh runs it before the suites:
//   tests/conformance/node_modules/.bin/node --test tests/conformance/harness.test.mjs
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const T = { timeout: 5000 };   // a relay that loses a message must fail, not hang
const here = path.dirname(fileURLToPath(import.meta.url));
const META = {
	'io.modelcontextprotocol/protocolVersion': '2026-07-28',
	'io.modelcontextprotocol/clientCapabilities': {},
};

function freePort() {
	return Number(spawnSync(process.execPath, [path.join(here, 'util.mjs'), 'port']).stdout.toString().trim());
}

// Every JSON-RPC message of a response: the body itself, or each SSE event's data.
async function messages(res) {
	const body = await res.text();
	if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) return [JSON.parse(body)];
	return body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
}

describe('bridge.mjs', () => {
	let bridge, url;
	const post = (msg, sse = true, signal) => fetch(url, {
		method: 'POST', signal,
		headers: { 'Content-Type': 'application/json', Accept: sse ? 'application/json, text/event-stream' : 'application/json' },
		body: JSON.stringify({ jsonrpc: '2.0', ...msg }),
	});
	const callTool = (id, name, meta = {}, sse = true, signal) =>
		post({ id, method: 'tools/call', params: { name, arguments: {}, _meta: { ...META, ...meta } } }, sse, signal);

	before(async () => {
		const port = freePort();
		url = `http://127.0.0.1:${port}/mcp`;
		bridge = spawn(process.execPath, [path.join(here, 'bridge.mjs'), '--port', String(port), '--',
			process.execPath, path.join(here, 'testdata/fake-server.mjs')], { stdio: 'inherit' });
		const w = spawnSync(process.execPath, [path.join(here, 'util.mjs'), 'wait', url, '10']);
		assert.equal(w.status, 0, 'the bridge did not start');
	});
	after(() => bridge?.kill('SIGTERM'));

	it('streams the progress and log notifications before the response, with the client id', T, async () => {
		const res = await callTool(7, 'talk', { progressToken: 'tok-A' });
		assert.equal(res.status, 200);
		assert.match(res.headers.get('content-type'), /text\/event-stream/);
		const msgs = await messages(res);
		assert.deepEqual(msgs.map((m) => m.method ?? 'response'),
			['notifications/progress', 'notifications/progress', 'notifications/message', 'response']);
		assert.deepEqual(msgs.slice(0, 2).map((m) => m.params.progressToken), ['tok-A', 'tok-A']);
		assert.equal(msgs[3].id, 7);
		assert.equal(msgs[3].result.content[0].text, 'done');
	});

	it('sends progress only to the request whose token it carries', T, async () => {
		const hang = new AbortController();
		const other = callTool(8, 'hang', { progressToken: 'tok-B' }, true, hang.signal);
		const msgs = await messages(await callTool(9, 'talk', { progressToken: 'tok-C' }));
		assert.deepEqual(msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progressToken),
			['tok-C', 'tok-C']);
		hang.abort();
		await other.catch(() => {});
	});

	it('answers plain JSON, without notifications, to a client that does not accept SSE', T, async () => {
		const res = await callTool(10, 'talk', { progressToken: 'tok-D' }, false);
		assert.match(res.headers.get('content-type'), /application\/json/);
		assert.deepEqual(await messages(res), [{ jsonrpc: '2.0', id: 10, result: { content: [{ type: 'text', text: 'done' }] } }]);
	});

	it('relays a server request on the stream and the client\'s response back to the server', T, async () => {
		const res = await callTool('ask-1', 'ask');
		const reader = res.body.getReader();
		let buf = '';
		while (!buf.includes('\n\n')) buf += new TextDecoder().decode((await reader.read()).value);
		const req = JSON.parse(buf.split('\n').find((l) => l.startsWith('data: ')).slice(6));
		assert.equal(req.method, 'elicitation/create');
		assert.equal(req.id, 'srv-1');
		const ack = await post({ id: 'srv-1', result: { action: 'accept', content: { name: 'Ada' } } });
		assert.equal(ack.status, 202);
		for (let r = await reader.read(); !r.done; r = await reader.read()) buf += new TextDecoder().decode(r.value);
		const last = JSON.parse(buf.trim().split('\n').filter((l) => l.startsWith('data: ')).pop().slice(6));
		assert.equal(last.id, 'ask-1');
		assert.deepEqual(JSON.parse(last.result.content[0].text), { action: 'accept', content: { name: 'Ada' } });
	});

	it('gives notifications/cancelled the relayed id of the request it names', T, async () => {
		const seen = async () => JSON.parse((await messages(await callTool(43, 'seen')))[0].result.content[0].text);
		const before = await seen();
		const hang = new AbortController();
		const res = await callTool(42, 'hang', {}, true, hang.signal);
		await res.body.getReader().read();   // its first frame: the request is open
		const ack = await post({ method: 'notifications/cancelled', params: { requestId: 42 } });
		assert.equal(ack.status, 202);
		const now = (await seen()).slice(before.length);
		assert.equal(now.length, 1);
		assert.match(now[0], /^bridge-\d+$/);
		hang.abort();
	});

	it('refuses a request without _meta protocolVersion with -32602 and HTTP 400', T, async () => {
		const res = await post({ id: 5, method: 'server/discover', params: {} });
		assert.equal(res.status, 400);
		const [m] = await messages(res);
		assert.equal(m.id, 5);
		assert.equal(m.error.code, -32602);
	});

	it('maps errors to HTTP statuses: -32601 404; -32602 400 only when clientCapabilities is missing', T, async () => {
		assert.equal((await post({ id: 1, method: 'nope', params: { _meta: META } })).status, 404);
		assert.equal((await callTool(2, 'unknown-tool')).status, 200);
		const noCaps = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' };
		const res = await post({ id: 3, method: 'tools/call', params: { name: 'unknown-tool', _meta: noCaps } });
		assert.equal(res.status, 400);
	});

	it('refuses a body that is not JSON-RPC', T, async () => {
		const res = await fetch(url, { method: 'POST', body: '[1,2' });
		assert.equal(res.status, 400);
		assert.equal((await res.json()).error.code, -32700);
		assert.equal((await post({ id: 1 })).status, 400);
	});
});

describe('util.mjs report', () => {
	let dir;
	before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkpoint-conf-harness-')); });
	after(() => fs.rmSync(dir, { recursive: true, force: true }));

	function run(expected, results, ran = Object.keys(results)) {
		const out = fs.mkdtempSync(path.join(dir, 'r-'));
		for (const [name, checks] of Object.entries(results)) {
			const sub = path.join(out, `server-${name}-2026-12-01T00-00-00-000Z`);
			fs.mkdirSync(sub);
			fs.writeFileSync(path.join(sub, 'checks.json'), JSON.stringify(checks));
		}
		fs.writeFileSync(path.join(out, 'expected'), expected);
		fs.writeFileSync(path.join(out, 'ran'), ran.map((n) => `P/${n}`).join('\n'));
		const r = spawnSync(process.execPath, [path.join(here, 'util.mjs'), 'report',
			path.join(out, 'expected'), path.join(out, 'ran'), `P/=${out}`]);
		return { status: r.status, out: r.stdout.toString() };
	}
	const ok = (id) => ({ id, status: 'SUCCESS' });
	const bad = (id) => ({ id, status: 'FAILURE', errorMessage: `${id} broke` });

	it('fails on a failing check that is not listed, naming it', () => {
		const r = run('P/s#c1 bug: one\n', { s: [bad('c1'), bad('c2'), ok('c3')] });
		assert.equal(r.status, 1);
		assert.match(r.out, /FAIL {2}P\/s\n {8}c2: c2 broke\n/);
		assert.doesNotMatch(r.out, /c1: c1 broke/);
	});

	it('counts a scenario whose failing checks are all listed as an expected failure', () => {
		const r = run('# a comment\nP/s#c1  bug: one   # trailing comment\nP/t feature: all of it\n',
			{ s: [bad('c1'), ok('c2')], t: [bad('x'), bad('y')] });
		assert.equal(r.status, 0, r.out);
		assert.match(r.out, /xfail P\/s {2}\(c1: bug: one\)/);
		assert.match(r.out, /xfail P\/t {2}\(feature: all of it\)/);
		assert.match(r.out, /2 expected failures/);
	});

	it('reports a listed check or scenario that passes now as XPASS', () => {
		const r = run('P/s#c1 bug: one\nP/t feature: all\n', { s: [ok('c1')], t: [ok('x')] });
		assert.equal(r.status, 0);
		assert.match(r.out, /XPASS P\/s {2}now passing: c1;/);
		assert.match(r.out, /XPASS P\/t {2}now passing: \(the whole scenario\);/);
	});

	it('fails a scenario that was started but left no results', () => {
		const r = run('', { s: [ok('c1')] }, ['s', 'gone']);
		assert.equal(r.status, 1);
		assert.match(r.out, /FAIL {2}P\/gone\n {8}P\/gone: the scenario produced no results/);
	});
});
