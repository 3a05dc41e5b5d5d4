// Hostile jobs (tests/helpers/badframes.c) must end in an error without hurting the supervisor
// or a sibling task; and the supervisor answers ping promptly while jobs burn CPU.
import { after, before, describe, it } from 'node:test';
import {
	assert, badframesTool, checkEnvelope, cpubusyTool, isAlive, isStatus, marker, pidsWithMarker,
	reportTool, startServer, startTask, TERMINAL, until, waitTask,
} from './lib.mjs';

const VIOLATION = /protocol|question|frame|msgpack|malformed|invalid|too large|size|oversize|limit|nest|deep|depth|flood|rate|quota/i;

describe('hostile jobs', () => {
	let srv;
	before(async () => {
		srv = await startServer({
			tools: [badframesTool('bad'), reportTool('report')],
			server: { maxConcurrent: 2, cancelGraceSeconds: 1 },
		});
	});
	after(async () => { await srv?.close(); });

	async function pingMs() {
		const t0 = Date.now();
		assert.deepEqual(await srv.client.ping(), {});
		return Date.now() - t0;
	}

	for (const mode of ['garbage', 'oversize', 'array32', 'array32map', 'deep', 'flood', 'asks', 'bigout']) {
		it(`${mode}: the task ends cleanly, a sibling completes, ping works`, async () => {
			const mark = marker(mode);
			const bad = await startTask(srv.client, 'bad', { mode, mark });
			const sib = await startTask(srv.client, 'report', { topic: `beside-${mode}`, sections: 2, delayMs: 100 });
			const t = await waitTask(srv.client, bad.taskId, (x) => TERMINAL.has(x.status), { timeoutMs: 20000 });
			if (mode === 'bigout') {
				if (t.status === 'completed') {
					assert.equal(t.result.exitCode, 0);
					assert.equal(typeof t.result.output, 'string');
					assert.ok(t.result.output.length < (8 << 20), `output tail is bounded: ${t.result.output.length}`);
				} else {
					assert.equal(t.status, 'failed', JSON.stringify(t));
					checkEnvelope(t.error);
					assert.ok(['job_failed', 'resource_limit', 'sandbox_violation'].includes(t.error.code),
						JSON.stringify(t.error));
				}
			} else {
				assert.equal(t.status, 'failed', `${mode}: ${JSON.stringify(t)}`);
				checkEnvelope(t.error);
				assert.ok(['job_failed', 'sandbox_violation'].includes(t.error.code), JSON.stringify(t.error));
				assert.match(t.error.message, VIOLATION, `message names the violation: ${t.error.message}`);
			}
			await until(() => pidsWithMarker(mark).length === 0, 3000, `${mode} job processes to be gone`);
			const s = await waitTask(srv.client, sib.taskId, isStatus('completed'), { timeoutMs: 15000 });
			assert.equal(s.result.topic, `beside-${mode}`);
			const ms = await pingMs();
			assert.ok(ms < 500, `ping took ${ms} ms`);
			assert.ok(isAlive(srv.pid), 'supervisor still running');
		});
	}

	it('the supervisor wrote nothing but JSON-RPC (the SDK saw no parse errors)', () => {
		assert.deepEqual(srv.clientErrors.map(String), []);
	});
});

describe('responsiveness', () => {
	let srv;
	before(async () => {
		srv = await startServer({ tools: [cpubusyTool('burn')], server: { maxConcurrent: 2 } });
	});
	after(async () => { await srv?.close(); });

	it('ping round trips stay under 500 ms while CPU-busy jobs run', async () => {
		const marks = [marker('burn'), marker('burn')];
		const hs = [];
		for (const mark of marks)
			hs.push(await startTask(srv.client, 'burn', { seconds: 3, mark }));
		await until(() => marks.every((m) => pidsWithMarker(m).length > 0), 5000, 'busy jobs to run');
		const times = [];
		for (let i = 0; i < 10; i++) {
			const t0 = Date.now();
			assert.deepEqual(await srv.client.ping(), {});
			times.push(Date.now() - t0);
		}
		assert.ok(marks.every((m) => pidsWithMarker(m).length > 0), 'jobs were still running during the pings');
		assert.ok(Math.max(...times) < 500, `ping times ${times.join(', ')} ms`);
		for (const h of hs)
			await waitTask(srv.client, h.taskId, isStatus('completed'), { timeoutMs: 10000 });
	});
});
