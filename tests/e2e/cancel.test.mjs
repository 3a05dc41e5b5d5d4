// Cancellation: durable_task_cancel on cooperative, plain and stubborn jobs (the job's
// processes must really be gone), and notifications/cancelled for an in-flight sync call.
import { after, before, describe, it } from 'node:test';
import {
	assert, call, getTask, isStatus, marker, pidsWithMarker, reportTool, sleep, sleeperTool,
	startRaw, startServer, startTask, stubbornTool, until, waitGone, waitTask, rawToolResult,
} from './lib.mjs';

const GRACE_MS = 1000;
const MARGIN_MS = 3000;

describe('durable_task_cancel', () => {
	let srv;
	before(async () => {
		srv = await startServer({
			tools: [reportTool('report'), sleeperTool('sleeper'), stubbornTool('stubborn')],
			server: { maxConcurrent: 2, cancelGraceSeconds: GRACE_MS / 1000 },
		});
	});
	after(async () => { await srv?.close(); });

	async function cancel(taskId) {
		const res = await call(srv.client, 'durable_task_cancel', { taskId });
		assert.ok(!res.isError, JSON.stringify(res.structuredContent));
		return res.structuredContent;
	}

	it('cancels a running cooperative job (report-generator)', async () => {
		const h = await startTask(srv.client, 'report', { topic: 'slow', sections: 3, delayMs: 60000 });
		await waitTask(srv.client, h.taskId, (t) => t.status === 'working' && t.startedAt !== undefined);
		const c = await cancel(h.taskId);
		assert.deepEqual(c.taskId, h.taskId);
		assert.equal(c.status, 'cancelled');
		assert.equal(typeof c.note, 'string');
		const t = await getTask(srv.client, h.taskId);
		assert.equal(t.status, 'cancelled');
		assert.equal(t.result, undefined);
		// it stays cancelled
		await sleep(GRACE_MS + 200);
		assert.equal((await getTask(srv.client, h.taskId)).status, 'cancelled');
	});

	it('a plain job is gone within the grace period after cancel', async () => {
		const mark = marker('sleep');
		const h = await startTask(srv.client, 'sleeper', { seconds: 60, mark });
		const pids = await until(() => { const p = pidsWithMarker(mark); return p.length ? p : null; },
			5000, `sleeper ${mark} to start`);
		const c = await cancel(h.taskId);
		assert.equal(c.status, 'cancelled');
		const ms = await waitGone(pids, GRACE_MS + MARGIN_MS, 'sleeper');
		assert.equal((await getTask(srv.client, h.taskId)).status, 'cancelled');
		assert.deepEqual(pidsWithMarker(mark), [], `no process left (took ${ms} ms)`);
	});

	it('a job ignoring cancel and SIGTERM is killed hard, setsid grandchild included', async () => {
		const mark = marker('stubborn');
		const h = await startTask(srv.client, 'stubborn', { mark });
		const pids = await until(() => { const p = pidsWithMarker(mark); return p.length >= 2 ? p : null; },
			5000, `stubborn ${mark} and its grandchild to run`);
		const c = await cancel(h.taskId);
		assert.equal(c.status, 'cancelled');
		const ms = await waitGone(pids, GRACE_MS + MARGIN_MS, 'stubborn tree');
		assert.ok(ms >= GRACE_MS * 0.6, `the grace period is honoured before the hard kill (gone after ${ms} ms)`);
		assert.deepEqual(pidsWithMarker(mark), []);
		assert.equal((await getTask(srv.client, h.taskId)).status, 'cancelled');
	});

	it('cancelling a finished task leaves it as it is', async () => {
		const h = await startTask(srv.client, 'sleeper', { seconds: 0.1, mark: marker('quick') });
		const done = await waitTask(srv.client, h.taskId, isStatus('completed'));
		assert.equal(done.result.exitCode, 0);
		const c = await cancel(h.taskId);
		assert.equal(c.status, 'completed');
		assert.equal((await getTask(srv.client, h.taskId)).status, 'completed');
	});
});

describe('notifications/cancelled for an in-flight sync call', () => {
	const tools = [sleeperTool('sleep-sync', { mode: 'sync' })];

	it('kills the job, sends no response for that id, keeps serving (raw)', async () => {
		const raw = startRaw({ tools, server: { cancelGraceSeconds: GRACE_MS / 1000 } });
		try {
			await raw.initialize();
			const mark = marker('sync');
			raw.send({ jsonrpc: '2.0', id: 'c1', method: 'tools/call',
				params: { name: 'sleep-sync', arguments: { seconds: 60, mark } } });
			const pids = await until(() => { const p = pidsWithMarker(mark); return p.length ? p : null; },
				5000, 'the sync job to start');
			raw.notify('notifications/cancelled', { requestId: 'c1', reason: 'test' });
			await waitGone(pids, GRACE_MS + MARGIN_MS, 'sync job');
			const pong = await raw.request('p1', 'ping');
			assert.deepEqual(pong.result, {});
			const r = await raw.request('c2', 'tools/call',
				{ name: 'sleep-sync', arguments: { seconds: 0.1, mark: marker('sync2') } }, { timeoutMs: 5000 });
			const res = rawToolResult(r);
			assert.ok(!res.isError, JSON.stringify(res));
			assert.equal(res.structuredContent.exitCode, 0);
			await sleep(300);
			assert.deepEqual(raw.messages.filter((m) => m.id === 'c1'), [], 'no response for the cancelled id');
			// cancelling an unknown id is ignored
			raw.notify('notifications/cancelled', { requestId: 'nope' });
			assert.deepEqual((await raw.request('p2', 'ping')).result, {});
			assert.deepEqual(raw.badLines, []);
		} finally {
			await raw.close();
		}
	});

	it('the SDK client aborting a call has the same effect', async () => {
		const srv = await startServer({ tools, server: { cancelGraceSeconds: GRACE_MS / 1000 } });
		try {
			const mark = marker('abort');
			const ac = new AbortController();
			const p = srv.client.callTool({ name: 'sleep-sync', arguments: { seconds: 60, mark } },
				undefined, { signal: ac.signal });
			const pids = await until(() => { const q = pidsWithMarker(mark); return q.length ? q : null; },
				5000, 'the sync job to start');
			ac.abort('test');
			await assert.rejects(p);
			await waitGone(pids, GRACE_MS + MARGIN_MS, 'aborted sync job');
			assert.deepEqual(await srv.client.ping(), {});
			await sleep(300);
			assert.deepEqual(srv.clientErrors.map(String), [], 'no stray response reached the client');
		} finally {
			await srv.close();
		}
	});
});
