// Plain programs (success / failure shapes), config validation at start-up, timeoutSeconds,
// and the queue behind server.maxConcurrent.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import {
	assert, BIN, checkEnvelope, countTool, getTask, isStatus, marker, pidsWithMarker, reportTool,
	sleeperTool, startServer, startTask, until, waitGone, waitTask, writeConfig,
} from './lib.mjs';

describe('plain programs', () => {
	let srv;
	before(async () => {
		srv = await startServer({
			tools: [countTool('count'), sleeperTool('short-fuse', { timeoutSeconds: 1 })],
		});
	});
	after(async () => { await srv?.close(); });

	it('exit 0 → completed with {exitCode: 0, output}', async () => {
		const h = await startTask(srv.client, 'count', { n: 5 });
		const t = await waitTask(srv.client, h.taskId, isStatus('completed'));
		assert.deepEqual(Object.keys(t.result).sort(), ['exitCode', 'output']);
		assert.equal(t.result.exitCode, 0);
		assert.equal(typeof t.result.output, 'string');
		for (let i = 1; i <= 5; i++)
			assert.match(t.result.output, new RegExp(`line ${i}\\b`));
	});

	it('the output keeps the last lines (plain-count prints one line per 10 ms)', async () => {
		const h = await startTask(srv.client, 'count', { n: 80 });
		const t = await waitTask(srv.client, h.taskId, isStatus('completed'));
		assert.equal(t.result.exitCode, 0);
		assert.match(t.result.output, /line 80\b/);
	});

	it('non-zero exit → failed with job_failed naming the exit status', async () => {
		const h = await startTask(srv.client, 'count', { n: 3, exit: 7 });
		const t = await waitTask(srv.client, h.taskId, isStatus('failed'));
		checkEnvelope(t.error);
		assert.equal(t.error.code, 'job_failed');
		assert.match(t.error.message, /\b7\b/, `message names the exit status: ${t.error.message}`);
		assert.match(t.error.message, /exit/i);
		assert.equal(t.result, undefined);
	});

	it('timeoutSeconds ends a long job as failed with code "timeout"', async () => {
		const mark = marker('fuse');
		const t0 = Date.now();
		const h = await startTask(srv.client, 'short-fuse', { seconds: 30, mark });
		const pids = await until(() => { const p = pidsWithMarker(mark); return p.length ? p : null; },
			5000, 'the job to start');
		const t = await waitTask(srv.client, h.taskId, isStatus('failed'), { timeoutMs: 10000 });
		checkEnvelope(t.error);
		assert.equal(t.error.code, 'timeout');
		const took = Date.now() - t0;
		assert.ok(took >= 900 && took < 8000, `failed after ${took} ms`);
		await waitGone(pids, 3000, 'timed-out job');
		assert.deepEqual(pidsWithMarker(mark), []);
	});
});

describe('queue behind maxConcurrent', () => {
	let srv;
	before(async () => {
		srv = await startServer({ tools: [reportTool('report')], server: { maxConcurrent: 1 } });
	});
	after(async () => { await srv?.close(); });

	it('waiting tasks show queuePosition and all of them complete', async () => {
		const hs = [];
		for (const topic of ['first', 'second', 'third'])
			hs.push(await startTask(srv.client, 'report', { topic, sections: 2, delayMs: 300 }));
		for (const h of hs)
			assert.equal(h.status, 'working');
		const [t1, t2, t3] = await Promise.all(hs.map((h) => getTask(srv.client, h.taskId)));
		assert.equal(t1.queuePosition, undefined, `first runs: ${JSON.stringify(t1)}`);
		assert.equal(t2.status, 'working');
		assert.equal(t2.queuePosition, 1, `second waits: ${JSON.stringify(t2)}`);
		assert.equal(t2.startedAt, undefined, 'no startedAt while queued');
		assert.equal(t3.queuePosition, 2, `third waits: ${JSON.stringify(t3)}`);
		// once the first is done the second moves up
		await waitTask(srv.client, hs[0].taskId, isStatus('completed'));
		await waitTask(srv.client, hs[2].taskId, (t) => t.queuePosition === 1 || t.startedAt !== undefined);
		for (const [i, h] of hs.entries()) {
			const t = await waitTask(srv.client, h.taskId, isStatus('completed'));
			assert.equal(t.result.topic, ['first', 'second', 'third'][i]);
		}
	});
});

describe('config validation at start-up', () => {
	function runMcp(cfg) {
		const { dir, cfgPath, stateDir } = writeConfig({ raw: cfg });
		return new Promise((resolve) => {
			const p = spawn(BIN, ['mcp', '--config', cfgPath, '--state', stateDir], { stdio: ['pipe', 'pipe', 'pipe'] });
			let out = '';
			let err = '';
			p.stdout.on('data', (d) => { out += d; });
			p.stderr.on('data', (d) => { err += d; });
			const timer = setTimeout(() => p.kill('SIGKILL'), 5000);
			p.on('close', (code, signal) => {
				clearTimeout(timer);
				fs.rmSync(dir, { recursive: true, force: true });
				resolve({ code, signal, out, err });
			});
		});
	}
	const base = (tool, server = {}) => ({ server: { name: 'e2e', ...server }, tools: [tool] });
	const cases = [
		['a command that does not exist', base({ ...countTool(), command: ['/nonexistent/prog', '{n}'] }),
			/tools\[0\]\.command/],
		['an unknown key', base({ ...countTool(), colour: 'blue' }), /tools\[0\]\.colour/],
		['an unknown server key', base(countTool(), { bogus: 1 }), /server\.bogus/],
		['a bad mode', base({ ...countTool(), mode: 'sometimes' }), /tools\[0\]\.mode/],
		['maxConcurrent 0', base(countTool(), { maxConcurrent: 0 }), /server\.maxConcurrent/],
		['not JSON', '{"server": ', /config/i],
	];
	for (const [what, cfg, re] of cases) {
		it(`${what}: exits non-zero with one line naming the key`, async () => {
			const r = await runMcp(cfg);
			assert.equal(r.signal, null, 'exits by itself');
			assert.notEqual(r.code, 0);
			assert.equal(r.out, '', 'nothing on stdout');
			const lines = r.err.trim().split('\n');
			assert.equal(lines.length, 1, `one line: ${JSON.stringify(r.err)}`);
			assert.match(lines[0], re);
		});
	}
});
