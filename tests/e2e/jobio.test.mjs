// What a job can make the supervisor do, and what of it reaches clients: one open question per
// task, log frames kept in the task log, the exact-fill truncation note, hello rate limits,
// validated MCP results and marked task handles, artifacts hashed only after the job is gone,
// and a bounded output queue for a client that stops reading.  The hostile jobs are modes of
// tests/helpers/badframes.c.
import { after, before, describe, it } from 'node:test';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
	assert, badframesTool, BIN, checkEnvelope, helper, marker, RawServer, rawToolResult, startServer,
	startTask, TERMINAL, until, waitTask, writeConfig,
} from './lib.mjs';

/** badframes with free-form arguments (FORKPOINT_ARGS carries them to the helper). */
const freeTool = (name, extra = {}) => {
	const t = badframesTool(name, extra);
	t.inputSchema.additionalProperties = true;
	return t;
};

const logPath = (stateDir, id) => path.join(stateDir, 'tasks', id, 'output.log');
const NOTE = '[forkpoint: output truncated at logMaxBytes]';

/** Close stdin like an MCP host; the server must exit 0 by itself (a sanitizer report fails it). */
async function closeRaw(raw) {
	if (!raw)
		return;
	raw.closeStdin();
	const e = await raw.waitExit(15000);
	if (!e)
		await raw.kill();
	assert.deepEqual(e, { code: 0, signal: null }, `server exit; stderr tail:\n${raw.stderr.slice(-3000)}`);
}

function vm(pid, key) {
	const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'));
	return m ? Number(m[1]) * 1024 : 0;
}

describe('job frames and output', () => {
	let srv;
	before(async () => {
		srv = await startServer({
			tools: [freeTool('bad')],
			server: { maxConcurrent: 2, cancelGraceSeconds: 1, logMaxBytes: 4096 },
		});
	});
	after(async () => { await srv?.close(); });

	const run = async (mode, args = {}, timeoutMs = 20000) => {
		const h = await startTask(srv.client, 'bad', { mode, mark: marker(mode), ...args });
		return waitTask(srv.client, h.taskId, (x) => TERMINAL.has(x.status), { timeoutMs });
	};

	it('output that fills logMaxBytes exactly, then more: the log gets the truncation note', async () => {
		const t = await run('exactout', { bytes: 4096 });
		assert.equal(t.status, 'completed', JSON.stringify(t));
		const log = fs.readFileSync(logPath(srv.stateDir, t.taskId), 'utf8');
		assert.equal(log.slice(0, 4096), 'x'.repeat(4096));
		assert.ok(!log.includes('after'), 'nothing past the budget is kept');
		assert.ok(log.includes(NOTE), `truncation note missing; log ends ${JSON.stringify(log.slice(-80))}`);
	});

	it('output that fits exactly and stops there gets no note', async () => {
		const t = await run('exactout', { bytes: 4000 });
		assert.equal(t.status, 'completed');
		const log = fs.readFileSync(logPath(srv.stateDir, t.taskId), 'utf8');
		assert.equal(log, `${'x'.repeat(4000)}after\n`);
	});

	it('a job that asks while its question is open fails with a protocol violation', async () => {
		const t = await run('asks', { count: 3000, promptBytes: 1000 });
		assert.equal(t.status, 'failed', JSON.stringify(t));
		checkEnvelope(t.error);
		assert.equal(t.error.code, 'job_failed');
		assert.match(t.error.message, /question is still open/);
	});

	it('a single question still works (input_required, then cancelled cleanly)', async () => {
		const h = await startTask(srv.client, 'bad', {
			mode: 'send', mark: marker('ask1'),
			frames: [{ type: 'ask', id: 'q1', prompt: 'ok?', choices: ['yes', 'no'] }],
		});
		const t = await waitTask(srv.client, h.taskId, (x) => x.status === 'input_required');
		assert.equal(t.inputRequest.questionId, 'q1');
		await srv.client.callTool({ name: 'durable_task_cancel', arguments: { taskId: h.taskId } });
	});

	it('a job\'s hellos are answered at a bounded rate, big start frames counted in bytes', async (ctx) => {
		const small = await run('hellos', { count: 200, ms: 1000 });
		assert.equal(small.status, 'completed', JSON.stringify(small));
		assert.ok(small.result.starts >= 1 && small.result.starts <= 60, `small start frames in 1 s: ${small.result.starts}`);
		const big = await run('hellos', { count: 200, ms: 1000, ckptBytes: 1 << 20 }, 30000);
		assert.equal(big.status, 'completed', JSON.stringify(big.error ?? big.status));
		ctx.diagnostic(`start frames for 200 hellos within 1 s: ${small.result.starts} small, ${big.result.starts} of 1 MiB`);
		assert.ok(big.result.starts >= 1 && big.result.starts <= 25, `1 MiB start frames in 1 s: ${big.result.starts}`);
	});

	it('artifacts are hashed after the job is gone: a job cannot change them after the hash', async () => {
		const t = await run('artswap');
		assert.equal(t.status, 'completed', JSON.stringify(t));
		assert.equal(t.artifacts?.length, 1, JSON.stringify(t.artifacts));
		const file = path.join(srv.stateDir, 'tasks', t.taskId, 'work', 'outputs', 'a.txt');
		const bytes = fs.readFileSync(file);
		assert.equal(t.artifacts[0].sha256, crypto.createHash('sha256').update(bytes).digest('hex'),
			`listed hash matches the file (${JSON.stringify(bytes.toString())})`);
		assert.equal(bytes.toString(), 'original\n');
	});
});

describe('a result from a job that lingers', () => {
	it('is kept when the server stops before the job exits', async () => {
		const w = writeConfig({ tools: [freeTool('linger')], server: { cancelGraceSeconds: 30 } });
		const raw = new RawServer({ cfgPath: w.cfgPath, stateDir: w.stateDir });
		try {
			await raw.initialize();
			const h = rawToolResult(await raw.request('c', 'tools/call', { name: 'linger', arguments: {
				mode: 'send', mark: marker('linger'), frames: [{ type: 'result', value: { kept: true } }] } }));
			const id = h.structuredContent.taskId;
			let n = 0;
			await until(async () => {
				const g = await raw.request(`g${n++}`, 'tools/call', { name: 'durable_task_get', arguments: { taskId: id } });
				const t = g.result.structuredContent;
				assert.equal(t.status, 'working', JSON.stringify(t));
				return /sent its result/.test(t.progress?.message ?? '');
			}, 20000, 'the result to arrive');
			await closeRaw(raw);
			const show = spawnSync(BIN, ['show', id, '--state', w.stateDir], { encoding: 'utf8', timeout: 20000 });
			assert.equal(show.status, 0, show.stderr);
			assert.match(show.stdout, /status\s+completed/);
			assert.match(show.stdout, /"kept":\s*true/);
		} finally {
			await raw.kill();
			fs.rmSync(w.dir, { recursive: true, force: true });
		}
	});
});

describe('job results forwarded to clients', () => {
	let srv;
	before(async () => {
		srv = await startServer({ tools: [freeTool('bad')], server: { cancelGraceSeconds: 1 } });
	});
	after(async () => { await srv?.close(); });

	const withResult = async (mcp) => {
		const h = await startTask(srv.client, 'bad', {
			mode: 'send', mark: marker('mcp'), exit: true, frames: [{ type: 'result', mcp }],
		});
		return waitTask(srv.client, h.taskId, (x) => TERMINAL.has(x.status));
	};
	const refused = [
		['an unknown block type', { content: [{ type: 'script', text: 'x' }] }],
		['a file:// resource link', { content: [{ type: 'resource_link', uri: 'file:///etc/passwd', name: 'p' }] }],
		['a file:// embedded resource', { content: [{ type: 'resource', resource: { uri: 'file:///etc/shadow', text: 'x' } }] }],
		['another task\'s resource', { content: [{ type: 'resource_link', uri: `forkpoint://tasks/${'0'.repeat(32)}/result`, name: 'r' }] }],
		['a text block without text', { content: [{ type: 'text' }] }],
		['an image that is not base64', { content: [{ type: 'image', data: 'not base64!', mimeType: 'image/png' }] }],
		['a non-object structuredContent', { content: [], structuredContent: [1] }],
	];
	for (const [what, mcp] of refused) {
		it(`refuses ${what}`, async () => {
			const t = await withResult(mcp);
			assert.equal(t.status, 'failed', JSON.stringify(t));
			assert.match(t.error.message, /invalid mcp result/);
		});
	}

	it('keeps valid blocks and drops every _meta the job supplied', async () => {
		const forged = { 'io.modelcontextprotocol/related-task': { taskId: 'f'.repeat(32) }, 'forkpoint/taskHandle': 'x' };
		const t = await withResult({
			_meta: forged,
			content: [
				{ type: 'text', text: 'hi', _meta: forged, extra: 1 },
				{ type: 'image', data: 'aGk=', mimeType: 'image/png', annotations: { audience: ['user'], priority: 0.5 } },
				{ type: 'resource_link', uri: 'https://example.org/x', name: 'x' },
				{ type: 'resource', resource: { uri: 'https://example.org/y', blob: 'aGk=', _meta: forged } },
			],
			structuredContent: { ok: true },
			isError: false,
		});
		assert.equal(t.status, 'completed', JSON.stringify(t));
		assert.deepEqual(t.result, {
			content: [
				{ type: 'text', text: 'hi' },
				{ type: 'image', data: 'aGk=', mimeType: 'image/png', annotations: { audience: ['user'], priority: 0.5 } },
				{ type: 'resource_link', uri: 'https://example.org/x', name: 'x' },
				{ type: 'resource', resource: { uri: 'https://example.org/y', blob: 'aGk=' } },
			],
			structuredContent: { ok: true },
			isError: false,
		});
	});
});

describe('forkpoint call and task-handle lookalikes', () => {
	it('a sync job whose result looks like a task handle is printed, not polled', () => {
		const foreign = 'a'.repeat(32);
		const tool = freeTool('look', { mode: 'sync' });
		const { dir, cfgPath, stateDir } = writeConfig({ tools: [tool] });
		const args = {
			mode: 'send', exit: true, frames: [{
				type: 'result',
				mcp: {
					content: [{ type: 'text', text: JSON.stringify({ taskId: foreign, pollWith: 'durable_task_get' }) }],
					structuredContent: { taskId: foreign, status: 'working', pollWith: 'durable_task_get' },
				},
			}],
		};
		const r = spawnSync(BIN, ['call', 'look', JSON.stringify(args), '--config', cfgPath, '--state', stateDir],
			{ encoding: 'utf8', timeout: 30000 });
		fs.rmSync(dir, { recursive: true, force: true });
		assert.equal(r.status, 0, `stderr: ${r.stderr}`);
		assert.ok(!/started/.test(r.stderr), `call took the result for a handle: ${r.stderr}`);
		assert.equal(JSON.parse(r.stdout).taskId, foreign);
	});
});

describe('log frames', () => {
	it('go to the task log within logMaxBytes; stderr and clients get a rate-limited summary', async (ctx) => {
		const { dir, cfgPath, stateDir } = writeConfig({
			tools: [freeTool('logs', { mode: 'sync' })], server: { logMaxBytes: 4096 },
		});
		const raw = new RawServer({ args: ['mcp', '--config', cfgPath, '--state', stateDir, '--log-level', 'warning'] });
		try {
			await raw.initialize();
			assert.ok((await raw.request('lv', 'logging/setLevel', { level: 'debug' })).result);
			const from = raw.mark();
			const resp = await raw.request('c1', 'tools/call', {
				name: 'logs', arguments: { mode: 'logflood', count: 3000, mark: marker('logs') },
			}, { timeoutMs: 30000 });
			const res = rawToolResult(resp);
			assert.equal(res.structuredContent.logged, true, JSON.stringify(res));
			const jobLogs = raw.messages.slice(from).filter((m) => m.method === 'notifications/message' &&
				/^job: /.test(m.params?.data?.message ?? ''));
			ctx.diagnostic(`3000 error-level log frames: ${jobLogs.length} notifications/message, ${raw.stderr.length} bytes on stderr`);
			assert.ok(jobLogs.length >= 1 && jobLogs.length <= 3, `job log notifications: ${jobLogs.length}`);
			assert.ok(jobLogs.every((m) => m.params.level === 'warning'), 'capped at warning');
			const jobLines = raw.stderr.split('\n').filter((l) => l.includes('msg="job: '));
			assert.ok(jobLines.length >= 1 && jobLines.length <= 3, `job lines on stderr: ${jobLines.length}`);
			assert.ok(raw.stderr.length < (16 << 10), `supervisor stderr: ${raw.stderr.length} bytes`);
			const id = fs.readdirSync(path.join(stateDir, 'tasks'))[0];
			const log = fs.readFileSync(logPath(stateDir, id), 'utf8');
			assert.ok(log.startsWith('[job log error] eeee'), log.slice(0, 40));
			assert.ok(log.length <= 4096 + NOTE.length + 2, `task log is ${log.length} bytes`);
			assert.ok(log.includes(NOTE));
		} finally {
			try {
				await closeRaw(raw);
			} finally {
				fs.rmSync(dir, { recursive: true, force: true });
			}
		}
	});
});

/** A supervisor behind a raw client that declared elicitation, with one finished task whose
 *  durable_task_get answer is about 1 MiB (so a few requests fill an output queue). */
async function slowClient() {
	const w = writeConfig({
		tools: [freeTool('big', { mode: 'sync' }), freeTool('elicit', { mode: 'sync' }), freeTool('gate', { mode: 'sync' })],
		server: { resultInlineBytes: 4 << 20, cancelGraceSeconds: 1 },
	});
	// Peak memory is a measure here: AddressSanitizer's quarantine of freed blocks would count
	// as growth (harmless to other builds).
	const asan = process.env.ASAN_OPTIONS;
	process.env.ASAN_OPTIONS = `${asan ? `${asan}:` : ''}quarantine_size_mb=0`;
	const raw = new RawServer({ cfgPath: w.cfgPath, stateDir: w.stateDir });
	if (asan === undefined)
		delete process.env.ASAN_OPTIONS;
	else
		process.env.ASAN_OPTIONS = asan;
	await raw.request('init', 'initialize', {
		protocolVersion: '2025-11-25', capabilities: { elicitation: {} }, clientInfo: { name: 'slow', version: '1' },
	});
	raw.notify('notifications/initialized');
	const resp = await raw.request('mk', 'tools/call', {
		name: 'big', arguments: { mode: 'send', exit: true, mark: marker('big'),
			frames: [{ type: 'result', value: { pad: 512 << 10 } }] },
	}, { timeoutMs: 30000 });
	assert.equal(rawToolResult(resp).structuredContent.pad?.length, 512 << 10, JSON.stringify(resp).slice(0, 600));
	const list = await raw.request('ls', 'tools/call', { name: 'durable_task_list', arguments: {} });
	return { raw, dir: w.dir, stateDir: w.stateDir, id: list.result.structuredContent.tasks[0].taskId };
}

describe('a client that stops reading', () => {
	let raw, dir, id;
	before(async () => {
		({ raw, dir, id } = await slowClient());
	});
	after(async () => {
		try {
			await closeRaw(raw);
		} finally {
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});

	it('gets no more than one elicitation per question even when the job asks 3000 times', async () => {
		const from = raw.mark();
		const resp = await raw.request('ask', 'tools/call', {
			name: 'elicit', arguments: { mode: 'asks', count: 3000, promptBytes: 1000, mark: marker('asks') },
		}, { timeoutMs: 30000 });
		const asks = raw.messages.slice(from).filter((m) => m.method === 'elicitation/create');
		assert.ok(asks.length <= 1, `${asks.length} elicitation requests`);
		for (const a of asks)
			raw.send({ jsonrpc: '2.0', id: a.id, result: { action: 'decline' } });
		const r = resp.result;
		assert.ok(r, JSON.stringify(resp));
	});

	it('the server stops taking requests while its output queue is full, then answers them all', async (ctx) => {
		const N = 100;
		const base = vm(raw.proc.pid, 'VmHWM'), rss = vm(raw.proc.pid, 'VmRSS');
		raw.proc.stdout.pause();
		const from = raw.mark();
		let batch = '';
		for (let i = 0; i < N; i++)
			batch += `${JSON.stringify({ jsonrpc: '2.0', id: `g${i}`, method: 'tools/call',
				params: { name: 'durable_task_get', arguments: { taskId: id } } })}\n`;
		raw.sendBytes(batch);
		await until(() => vm(raw.proc.pid, 'VmRSS') > rss + (8 << 20), 20000, 'the output queue to fill');
		raw.proc.stdout.resume();
		for (let i = 0; i < N; i++)
			await raw.response(`g${i}`, { from, timeoutMs: 60000 });
		const grown = vm(raw.proc.pid, 'VmHWM') - base;
		ctx.diagnostic(`peak memory grew by ${(grown / 1048576).toFixed(1)} MiB for ${N} answers of ~1 MiB to a client that stopped reading`);
		assert.ok(grown < (64 << 20), `peak memory grew by ${(grown / 1048576).toFixed(1)} MiB for ${N} answers of ~1 MiB`);
		assert.deepEqual(raw.badLines, []);
		assert.deepEqual((await raw.request('p', 'ping')).result, {});
	});
});

describe('progress for a client that stops reading', () => {
	let raw, dir, id, stateDir;
	before(async () => {
		({ raw, dir, id, stateDir } = await slowClient());
	});
	after(async () => {
		try {
			await closeRaw(raw);
		} finally {
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});

	it('progress held back while the client does not read arrives, the latest, once it reads again; log lines are counted', async () => {
		const isProgress = (msg) => (m) => m.method === 'notifications/progress' && m.params?.progressToken === 'pt' &&
			(m.params.message ?? '').startsWith(msg);
		assert.ok((await raw.request('lv', 'logging/setLevel', { level: 'debug' })).result);
		const from = raw.mark();
		raw.send({ jsonrpc: '2.0', id: 'gate', method: 'tools/call', params: {
			name: 'gate', arguments: { mode: 'gated', count: 50, mark: marker('gate') }, _meta: { progressToken: 'pt' } } });
		await raw.waitFor(isProgress('before'), { from, timeoutMs: 20000, what: 'the first progress' });
		const list = await raw.request('ls2', 'tools/call', { name: 'durable_task_list', arguments: {} });
		const gated = list.result.structuredContent.tasks.find((x) => x.tool === 'gate').taskId;
		const work = path.join(stateDir, 'tasks', gated, 'work');
		const errFrom = raw.stderr.length;
		raw.proc.stdout.pause();
		const fromGet = raw.mark();
		let batch = '';
		for (let i = 0; i < 40; i++)
			batch += `${JSON.stringify({ jsonrpc: '2.0', id: `h${i}`, method: 'tools/call',
				params: { name: 'durable_task_get', arguments: { taskId: id } } })}\n`;
		raw.sendBytes(batch);
		await until(() => /the client does not read its output/.test(raw.stderr.slice(errFrom)), 20000,
			'the server to say it holds back (stderr)');
		fs.writeFileSync(path.join(work, 'go'), '');
		await until(() => fs.existsSync(path.join(work, 'sent')), 20000, 'the job to send its progress');
		raw.proc.stdout.resume();
		for (let i = 0; i < 40; i++)
			await raw.response(`h${i}`, { from: fromGet, timeoutMs: 60000 });
		await until(() => /the client reads its output again/.test(raw.stderr.slice(errFrom)), 20000, 'the resume (stderr)');
		const late = await raw.waitFor(isProgress('after-go'), { from: fromGet, timeoutMs: 20000, what: 'the held-back progress' });
		assert.match(late.params.message, /^after-go \d+$/);
		fs.writeFileSync(path.join(work, 'finish'), '');
		const resp = await raw.response('gate', { from, timeoutMs: 20000 });
		assert.equal(resp.result?.structuredContent?.gated, true, JSON.stringify(resp));
		const after = raw.messages.slice(from).filter(isProgress('after-go'));
		assert.ok(after.length <= 3, `${after.length} progress notifications for 50 updates while congested`);
		const last = raw.messages.indexOf(after[after.length - 1]);
		assert.ok(last < raw.messages.indexOf(resp), 'progress before the response');
		// The job's log line came while nothing could be sent: it was counted, not queued.
		const logs = raw.messages.slice(fromGet).filter((m) => m.method === 'notifications/message');
		assert.ok(!logs.some((m) => /while congested/.test(m.params.data.message)), 'a log line was queued for a client that did not read');
		await raw.waitFor((m) => m.method === 'notifications/message' && /log messages were not sent while this client was not reading/.test(m.params?.data?.message ?? ''),
			{ from: fromGet, timeoutMs: 20000, what: 'the count of dropped log lines' });
	});
});


/** CPU time (user + system) of a process so far, in seconds. */
function cpuSeconds(pid) {
	const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
	const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');   // f[0] is field 3 (state)
	return (Number(f[11]) + Number(f[12])) / 100;                   // utime, stime: USER_HZ ticks
}

describe('a job that closes its frame socket and runs on', () => {
	let srv;
	// The socket's number comes in FORKPOINT_FD; after closing it the job sleeps 1.5 s.
	const closer = (name, sandbox) => ({
		name,
		command: ['/bin/sh', '-c', 'eval "exec $FORKPOINT_FD>&-"; sleep 1.5'],
		...(sandbox ? { sandbox } : {}),
	});
	before(async () => {
		srv = await startServer({ tools: [closer('closer'), closer('closer-none', { profile: 'none' })] });
	});
	after(async () => { await srv?.close(); });

	for (const name of ['closer', 'closer-none']) {
		it(`${name}: the supervisor sleeps until the job ends (its hang-up does not spin the loop)`, async () => {
			const before0 = cpuSeconds(srv.pid);
			const t0 = Date.now();
			const h = await startTask(srv.client, name, {});
			const t = await waitTask(srv.client, h.taskId, (x) => TERMINAL.has(x.status), { timeoutMs: 20000, intervalMs: 200 });
			const wall = (Date.now() - t0) / 1000;
			const cpu = cpuSeconds(srv.pid) - before0;
			assert.equal(t.status, 'completed', JSON.stringify(t));
			assert.ok(wall >= 1.4, `the job ran ${wall} s`);
			// Polling every 200 ms costs a few ms; a loop woken by the hang-up every turn burns
			// a core for the job's 1.5 s (0.47 s of CPU measured even on a loaded machine).
			assert.ok(cpu < 0.3, `the supervisor used ${cpu.toFixed(2)} s of CPU in ${wall.toFixed(2)} s`);
		});
	}
});
