// A job written in shell (runner/examples/shell-report.sh) speaking the protocol through the
// forkpoint-job helper, which the supervisor puts on the job's PATH.
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import {
	assert, call, getTask, isStatus, SHELL_REPORT, startServer, startTask, waitTask,
} from './lib.mjs';

describe('shell job through forkpoint-job', () => {
	let srv;
	before(async () => {
		assert.ok(fs.existsSync(SHELL_REPORT), `${SHELL_REPORT} exists`);
		srv = await startServer({
			tools: [{
				name: 'shell-report',
				description: 'Five steps in shell, with an optional question.',
				inputSchema: { type: 'object', properties: { ask: { type: 'boolean', default: false } } },
				command: [SHELL_REPORT],
			}],
		});
	});
	after(async () => { await srv?.close(); });

	it('completes with its result, reporting progress on the way', async () => {
		const h = await startTask(srv.client, 'shell-report', {});
		const fractions = [];
		const t = await waitTask(srv.client, h.taskId, isStatus('completed'), {
			onPoll: (x) => { if (typeof x.progress?.fraction === 'number') fractions.push(x.progress.fraction); },
		});
		assert.deepEqual(t.result, { steps: 5, resumedFrom: 0, summary: null });
		assert.ok(fractions.length >= 1, 'progress seen while it ran');
		assert.ok(fractions.every((f, i) => i === 0 || f >= fractions[i - 1]), `${fractions}`);
	});

	it('with ask:true the question and the answer flow through the helper', async () => {
		const h = await startTask(srv.client, 'shell-report', { ask: true });
		const q = await waitTask(srv.client, h.taskId, isStatus('input_required'), { timeoutMs: 15000 });
		assert.deepEqual(q.inputRequest, {
			questionId: 'add-summary', prompt: 'Add a summary line?', choices: ['yes', 'no'],
		});
		assert.equal(q.respondWith, 'durable_task_respond');
		const r = await call(srv.client, 'durable_task_respond', { taskId: h.taskId, response: 'no' });
		assert.ok(!r.isError, JSON.stringify(r.structuredContent));
		assert.equal(r.structuredContent.accepted, true);
		const t = await waitTask(srv.client, h.taskId, isStatus('completed'));
		assert.deepEqual(t.result, { steps: 5, resumedFrom: 0, summary: false });
		assert.equal((await getTask(srv.client, h.taskId)).status, 'completed');
	});
});
