// Raw protocol robustness: the binary driven by hand-written lines.  Every stdout line must be
// a JSON-RPC 2.0 message; malformed input gets the right error and the server stays alive.
import { after, before, describe, it } from 'node:test';
import {
	assert, countTool, marker, pidsWithMarker, rawToolResult, sleeperTool, startRaw, until, waitGone,
} from './lib.mjs';

describe('raw JSON-RPC robustness', () => {
	let raw;
	before(() => { raw = startRaw({ tools: [countTool('count')] }); });
	after(async () => { await raw?.close(); });

	const isErr = (code) => (m) => m.error && m.error.code === code;
	async function alive(id) {
		const r = await raw.request(id, 'ping');
		assert.deepEqual(r.result, {}, `ping after: ${JSON.stringify(r)}`);
	}

	it('a request before initialize is refused with its id; ping is answered', async () => {
		const r = await raw.request(1, 'tools/list', {});
		assert.equal(r.id, 1);
		assert.ok(r.error, `expected an error: ${JSON.stringify(r)}`);
		assert.equal(typeof r.error.code, 'number');
		assert.ok([-32600, -32002, -32000].includes(r.error.code), `code ${r.error.code}`);
		await alive('pre-init-ping');
		await raw.initialize();
		const list = await raw.request(2, 'tools/list', {});
		assert.ok(list.result?.tools, JSON.stringify(list));
	});

	it('numeric ids come back byte for byte, past 2^53 and up to 2^63 - 1', async () => {
		for (const id of ['1000000000000000', '9007199254740993', '9223372036854775807', '-9223372036854775808']) {
			const from = raw.lines.length;
			raw.send(`{"jsonrpc":"2.0","id":${id},"method":"ping"}`);
			raw.send(`{"jsonrpc":"2.0","id":${id},"method":"no/such/method"}`);
			await until(() => raw.lines.slice(from).filter((l) => l.includes(`"id":${id},`)).length === 2,
				5000, `both answers to id ${id}`);
		}
		const from = raw.mark();
		raw.send('{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}');
		const r = await raw.waitFor((m) => m.error && m.id === null, { from, what: 'the refusal of 2^63' });
		assert.equal(r.error.code, -32600);
		await alive('ids-after');
	});

	it('malformed JSON → -32700 with id null', async () => {
		const from = raw.mark();
		raw.send('{"jsonrpc":"2.0","id":3,"method":');
		const r = await raw.waitFor((m) => m.error && m.id === null, { from, what: 'parse error' });
		assert.equal(r.error.code, -32700);
		assert.equal(typeof r.error.message, 'string');
		await alive('p3');
	});

	it('a batch (JSON array) → -32600', async () => {
		const from = raw.mark();
		raw.send('[{"jsonrpc":"2.0","id":4,"method":"ping"}]');
		const r = await raw.waitFor((m) => !!m.error, { from, what: 'batch error' });
		assert.equal(r.error.code, -32600);
		assert.equal(r.id, null);
		await alive('p4');
		assert.ok(!raw.messages.some((m) => m.id === 4 && m.result), 'the batch content was not run');
	});

	it('an invalid request object → -32600', async () => {
		const from = raw.mark();
		raw.send('{"jsonrpc":"1.0","id":"v1","method":"ping"}');
		const e = await raw.waitFor((m) => !!m.error, { from, what: 'invalid request error' });
		assert.equal(e.error.code, -32600);
		const from2 = raw.mark();
		raw.send('{"jsonrpc":"2.0","id":"v2","method":42}');
		const e2 = await raw.waitFor((m) => !!m.error, { from: from2, what: 'invalid request error' });
		assert.equal(e2.error.code, -32600);
		await alive('p-v');
	});

	it('an unknown method → -32601 with the same id', async () => {
		const r = await raw.request(5, 'no/such/method', {});
		assert.equal(r.id, 5);
		assert.equal(r.error?.code, -32601);
		const r2 = await raw.request('five', 'no/such/method');
		assert.equal(r2.error?.code, -32601);
	});

	it('tools/call without a name → -32602', async () => {
		const r = await raw.request(6, 'tools/call', { arguments: {} });
		assert.equal(r.error?.code, -32602, JSON.stringify(r));
	});

	it('tools/call of an unknown tool → -32602', async () => {
		const r = await raw.request(7, 'tools/call', { name: 'no-such-tool', arguments: {} });
		assert.equal(r.error?.code, -32602, JSON.stringify(r));
	});

	it('a 10 MB line that is not valid JSON → an error, then ping still works', async () => {
		const from = raw.mark();
		raw.send(`{"jsonrpc":"2.0","id":8,"method":"ping","params":{"pad":"${'x'.repeat(10 << 20)}`);
		const r = await raw.waitFor((m) => !!m.error, { from, timeoutMs: 10000, what: 'error for the 10 MB line' });
		assert.ok([-32700, -32600].includes(r.error.code), `code ${r.error.code}`);
		await alive('p8');
	});

	it('a 10 MB well-formed request gets an answer (result or error) and ping still works', async () => {
		const from = raw.mark();
		raw.send(`{"jsonrpc":"2.0","id":9,"method":"ping","params":{"_meta":{"pad":"${'y'.repeat(10 << 20)}"}}}`);
		const r = await raw.waitFor((m) => m.id === 9 || (m.id === null && m.error),
			{ from, timeoutMs: 10000, what: 'answer to the 10 MB request' });
		assert.ok(r.result || r.error);
		await alive('p9');
	});

	it('a line of binary garbage → -32700, still alive', async () => {
		const bytes = [];
		for (let i = 0; i < 4096; i++) {
			const b = (i * 131 + 7) & 0xff;
			bytes.push(b === 10 ? 0 : b);
		}
		const from = raw.mark();
		raw.sendBytes(Buffer.concat([Buffer.from(bytes), Buffer.from('\n')]));
		const r = await raw.waitFor((m) => !!m.error, { from, what: 'parse error for binary garbage' });
		assert.equal(r.error.code, -32700);
		assert.equal(r.id, null);
		await alive('p10');
	});

	it('notifications get no response', async () => {
		const from = raw.mark();
		raw.notify('notifications/initialized');
		raw.notify('notifications/no-such-thing', { x: 1 });
		raw.notify('notifications/cancelled', { requestId: 'never-sent' });
		raw.notify('notifications/progress', { progressToken: 'zz', progress: 1 });
		raw.send('{"jsonrpc":"2.0","method":"ping"}');   // a request without id is a notification
		const pong = await raw.request('p11', 'ping');
		const idx = raw.messages.indexOf(pong);
		const between = raw.messages.slice(from, idx).filter((m) => 'result' in m || 'error' in m);
		assert.deepEqual(between, [], 'no response to any notification');
	});

	it('nothing but JSON-RPC 2.0 on stdout', () => {
		assert.deepEqual(raw.badLines, []);
	});
});

describe('stdin EOF', () => {
	it('the server exits 0 within 5 s and ends its running jobs', async () => {
		const raw = startRaw({ tools: [sleeperTool('sleeper')] });
		try {
			await raw.initialize();
			const mark = marker('eof');
			const r = await raw.request(1, 'tools/call', { name: 'sleeper', arguments: { seconds: 60, mark } });
			const h = rawToolResult(r).structuredContent;
			assert.match(h.taskId, /^[0-9a-f]{32}$/);
			const pids = await until(() => { const p = pidsWithMarker(mark); return p.length ? p : null; },
				5000, 'the job to start');
			const t0 = Date.now();
			raw.closeStdin();
			const exit = await raw.waitExit(5000);
			assert.ok(exit, `still running ${Date.now() - t0} ms after stdin EOF`);
			assert.deepEqual(exit, { code: 0, signal: null }, `exit status; stderr:\n${raw.stderr.slice(-3000)}`);
			await waitGone(pids, 1000, 'job after supervisor exit');
			assert.deepEqual(raw.badLines, []);
		} finally {
			await raw.close();
		}
	});
});
