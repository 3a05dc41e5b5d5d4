// Tool modes: sync (the result inside the call, progress notifications before it) and auto
// (inline when fast, a task handle when slow).
import { after, before, describe, it } from 'node:test';
import {
	assert, call, countTool, isStatus, reportTool, startServer, TASK_ID, waitTask,
} from './lib.mjs';

describe('sync and auto modes', () => {
	let srv;
	before(async () => {
		srv = await startServer({
			tools: [
				reportTool('report-sync', { mode: 'sync' }),
				{
					name: 'repeat-sync', mode: 'sync', description: 'The same fraction twice, then the total.',
					inputSchema: { type: 'object' },
					command: ['/bin/sh', '-c', 'forkpoint-job progress 0.5 a; sleep 0.2; forkpoint-job progress 0.5 b; ' +
						'sleep 0.2; forkpoint-job progress 1 c; sleep 0.2; forkpoint-job result \'{"ok":true}\''],
				},
				reportTool('report-auto', { mode: 'auto', waitSeconds: 0.5 }),
				countTool('count-sync', { mode: 'sync' }),
			],
		});
	});
	after(async () => { await srv?.close(); });

	it('sync: a repeated fraction with a new message still rises as the client reads it, never past the total', async () => {
		const progress = [];
		const res = await call(srv.client, 'repeat-sync', {}, { onprogress: (p) => progress.push(p) });
		assert.deepEqual(res.structuredContent, { ok: true });
		const msgs = progress.map((p) => p.message);
		assert.ok(msgs.includes('a') && msgs.includes('b'), JSON.stringify(progress));
		for (let i = 0; i < progress.length; i++) {
			assert.ok(progress[i].progress <= progress[i].total, JSON.stringify(progress));
			if (i > 0) assert.ok(progress[i].progress > progress[i - 1].progress, `strictly increasing: ${JSON.stringify(progress)}`);
		}
	});

	it('sync: the call answers with the job result; progress arrives before it', async () => {
		const progress = [];
		let resolved = false;
		const res = await call(srv.client, 'report-sync', { topic: 'kites', sections: 3, delayMs: 150 }, {
			onprogress: (p) => { progress.push({ ...p, late: resolved }); },
		});
		resolved = true;
		assert.ok(!res.isError, JSON.stringify(res.structuredContent));
		const r = res.structuredContent;
		assert.equal(r.topic, 'kites');
		assert.equal(r.sections, 3);
		assert.equal(r.appendix, false);
		assert.equal(typeof r.report, 'string');
		assert.equal(r.taskId, undefined, 'not a task handle');
		assert.ok(progress.length >= 1, 'at least one progress notification');
		assert.ok(progress.every((p) => !p.late), 'all progress before the result');
		for (let i = 0; i < progress.length; i++) {
			assert.equal(progress[i].total, 1);
			assert.ok(progress[i].progress >= 0 && progress[i].progress <= 1, JSON.stringify(progress[i]));
			if (i > 0)
				assert.ok(progress[i].progress > progress[i - 1].progress,
					`strictly increasing: ${JSON.stringify(progress)}`);
		}
	});

	it('sync: a failing job answers isError with the envelope', async () => {
		const res = await call(srv.client, 'count-sync', { n: 2, exit: 4 });
		assert.equal(res.isError, true);
		assert.equal(res.structuredContent.error?.code, 'job_failed', JSON.stringify(res.structuredContent));
	});

	it('sync: a plain program answers {exitCode, output}', async () => {
		const res = await call(srv.client, 'count-sync', { n: 3 });
		assert.ok(!res.isError);
		assert.equal(res.structuredContent.exitCode, 0);
		assert.match(res.structuredContent.output, /line 3/);
	});

	it('auto: a fast job returns its result inline', async () => {
		const res = await call(srv.client, 'report-auto', { topic: 'quick', sections: 1, delayMs: 10 });
		assert.ok(!res.isError, JSON.stringify(res.structuredContent));
		assert.equal(res.structuredContent.topic, 'quick');
		assert.equal(res.structuredContent.taskId, undefined);
	});

	it('auto: a slow job returns a task handle that completes', async () => {
		const t0 = Date.now();
		const res = await call(srv.client, 'report-auto', { topic: 'slowly', sections: 3, delayMs: 400 });
		const took = Date.now() - t0;
		assert.ok(!res.isError);
		const h = res.structuredContent;
		assert.match(h.taskId ?? '', TASK_ID, JSON.stringify(h));
		assert.equal(h.status, 'working');
		assert.equal(h.pollWith, 'durable_task_get');
		assert.ok(took >= 400 && took < 3000, `returned after waitSeconds (${took} ms)`);
		const t = await waitTask(srv.client, h.taskId, isStatus('completed'));
		assert.equal(t.result.topic, 'slowly');
	});
});
