// The report-generator example in task mode: handle, progress, result, questions, argument
// validation and the durable_task_list / unknown_task facade behaviour.
import { after, before, describe, it } from 'node:test';
import {
	assert, call, checkEnvelope, envelopeOf, getTask, ISO_MS, isStatus, reportTool, startServer,
	startTask, TASK_ID, waitTask,
} from './lib.mjs';

const HANDLE_KEYS = ['note', 'pollIntervalMs', 'pollWith', 'status', 'taskId', 'tool'];

describe('report-generator as a task', () => {
	let srv;
	const finished = {};   // taskId -> final status, for the list checks
	before(async () => {
		srv = await startServer({ tools: [reportTool('report')], server: { maxConcurrent: 2 } });
	});
	after(async () => { await srv?.close(); });

	it('returns the documented handle, reports rising progress, completes with the result', async () => {
		const res = await call(srv.client, 'report', { topic: 'otters', sections: 4, delayMs: 250 });
		assert.ok(!res.isError);
		const h = res.structuredContent;
		assert.deepEqual(Object.keys(h).sort(), HANDLE_KEYS, `handle keys: ${JSON.stringify(h)}`);
		assert.match(h.taskId, TASK_ID);
		assert.equal(h.status, 'working');
		assert.equal(h.tool, 'report');
		assert.equal(h.pollWith, 'durable_task_get');
		assert.ok(Number.isInteger(h.pollIntervalMs) && h.pollIntervalMs > 0, 'pollIntervalMs');
		assert.match(h.note, /durable_task_get/);

		const fractions = [];
		const done = await waitTask(srv.client, h.taskId, isStatus('completed'), {
			onPoll(t) {
				if (t.status !== 'working')
					return;
				assert.equal(t.tool, 'report');
				assert.ok(Number.isInteger(t.pollIntervalMs), `working pollIntervalMs: ${JSON.stringify(t)}`);
				assert.equal(typeof t.note, 'string');
				const f = t.progress?.fraction;
				if (typeof f === 'number') {
					assert.ok(f >= 0 && f <= 1, `fraction in 0..1: ${f}`);
					assert.equal(typeof t.progress.message, 'string');
					fractions.push(f);
				}
			},
		});
		assert.ok(fractions.some((f, i) => i > 0 && f > fractions[i - 1]),
			`progress fraction rose at least once: ${JSON.stringify(fractions)}`);
		for (let i = 1; i < fractions.length; i++)
			assert.ok(fractions[i] >= fractions[i - 1], `fraction never goes back: ${fractions}`);

		const r = done.result;
		assert.equal(r.topic, 'otters');
		assert.equal(r.sections, 4);
		assert.equal(r.appendix, false);
		assert.ok(Number.isInteger(r.words) && r.words > 0, `words: ${r.words}`);
		assert.ok(r.resumedFrom === null || r.resumedFrom === 0, `resumedFrom on a fresh run: ${r.resumedFrom}`);
		assert.equal(typeof r.report, 'string');
		assert.match(r.report, /otters/);
		assert.match(done.createdAt, ISO_MS);
		assert.match(done.updatedAt, ISO_MS);
		assert.match(done.expiresAt, ISO_MS);
		assert.equal(done.attempt, 1);
		assert.equal(typeof done.note, 'string');
		finished[h.taskId] = 'completed';
	});

	it('asks a question, rejects a non-choice answer, resumes on "yes"', async () => {
		const h = await startTask(srv.client, 'report', { topic: 'herons', sections: 2, delayMs: 50, ask: true });
		const q = await waitTask(srv.client, h.taskId, isStatus('input_required'));
		assert.deepEqual(q.inputRequest, {
			questionId: 'include-appendix', prompt: 'Include an appendix?', choices: ['yes', 'no'],
		});
		assert.equal(q.respondWith, 'durable_task_respond');

		const bad = await call(srv.client, 'durable_task_respond', { taskId: h.taskId, response: 'maybe' });
		const e = envelopeOf(bad);
		assert.equal(e.code, 'invalid_param');
		assert.equal(bad.structuredContent.status, 'failed');
		// the question is still open
		assert.equal((await getTask(srv.client, h.taskId)).status, 'input_required');

		const ok = await call(srv.client, 'durable_task_respond', { taskId: h.taskId, response: 'yes' });
		assert.ok(!ok.isError, JSON.stringify(ok.structuredContent));
		const a = ok.structuredContent;
		assert.equal(a.taskId, h.taskId);
		assert.equal(a.status, 'working');
		assert.equal(a.accepted, true);
		assert.equal(typeof a.note, 'string');

		const done = await waitTask(srv.client, h.taskId, isStatus('completed'));
		assert.equal(done.result.appendix, true);
		assert.equal(done.result.topic, 'herons');
		finished[h.taskId] = 'completed';

		const late = await call(srv.client, 'durable_task_respond', { taskId: h.taskId, response: 'no' });
		assert.equal(late.isError, true, 'answering a finished task is an error');
	});

	it('a job that fails ends as a failed task with job_failed (get itself is no error)', async () => {
		const h = await startTask(srv.client, 'report', { topic: 'eels', sections: 3, delayMs: 30, failAt: 2 });
		const t = await waitTask(srv.client, h.taskId, isStatus('failed'));
		assert.equal(t.error.code, 'job_failed');
		checkEnvelope(t.error);
		finished[h.taskId] = 'failed';
	});

	describe('invalid arguments are refused before anything runs', () => {
		const cases = [
			['missing topic', { sections: 2 }, 'topic'],
			['topic of the wrong type', { topic: 5 }, 'topic'],
			['sections of the wrong type', { topic: 'x', sections: 'three' }, 'sections'],
			['sections above maximum', { topic: 'x', sections: 11 }, 'sections'],
			['sections below minimum', { topic: 'x', sections: 0 }, 'sections'],
			['non-integer sections', { topic: 'x', sections: 2.5 }, 'sections'],
		];
		for (const [what, args, field] of cases) {
			it(what, async () => {
				const before = (await call(srv.client, 'durable_task_list', {})).structuredContent.tasks.length;
				const res = await call(srv.client, 'report', args);
				const e = envelopeOf(res);
				assert.equal(e.code, 'invalid_arguments');
				assert.equal(e.param, field, `error.param: ${JSON.stringify(e)}`);
				assert.match(e.message, new RegExp(field));
				const after_ = (await call(srv.client, 'durable_task_list', {})).structuredContent.tasks.length;
				assert.equal(after_, before, 'no task was created');
			});
		}
	});

	it('durable_task_list shows the tasks, newest first, and filters by status', async () => {
		const res = await call(srv.client, 'durable_task_list', {});
		assert.ok(!res.isError);
		const { tasks } = res.structuredContent;
		assert.ok(Array.isArray(tasks));
		for (const [id, status] of Object.entries(finished)) {
			const t = tasks.find((x) => x.taskId === id);
			assert.ok(t, `task ${id} listed`);
			assert.equal(t.status, status);
			assert.equal(t.tool, 'report');
			assert.match(t.createdAt, ISO_MS);
			assert.match(t.updatedAt, ISO_MS);
		}
		for (let i = 1; i < tasks.length; i++)
			assert.ok(tasks[i - 1].createdAt >= tasks[i].createdAt, 'newest first');

		const only = (await call(srv.client, 'durable_task_list', { status: 'completed' })).structuredContent.tasks;
		assert.ok(only.length >= 1);
		assert.ok(only.every((t) => t.status === 'completed'), JSON.stringify(only));
		const failedIds = Object.keys(finished).filter((id) => finished[id] === 'failed');
		const failed = (await call(srv.client, 'durable_task_list', { status: 'failed' })).structuredContent.tasks;
		assert.deepEqual(failed.map((t) => t.taskId).sort(), failedIds.sort());
	});

	it('an unknown task id answers the unknown_task envelope', async () => {
		for (const taskId of ['0123456789abcdef0123456789abcdef', 'abc']) {
			for (const tool of ['durable_task_get', 'durable_task_cancel']) {
				const res = await call(srv.client, tool, { taskId });
				const e = envelopeOf(res);
				assert.equal(e.code, 'unknown_task', `${tool} ${taskId}: ${JSON.stringify(e)}`);
				assert.equal(e.retryable, false);
				assert.equal(res.structuredContent.status, 'failed');
			}
		}
		const res = await call(srv.client, 'durable_task_respond',
			{ taskId: 'fedcba9876543210fedcba9876543210', response: 'yes' });
		assert.equal(envelopeOf(res).code, 'unknown_task');
	});

	it('a facade call without its required parameter answers invalid_param', async () => {
		const res = await call(srv.client, 'durable_task_get', {});
		const e = envelopeOf(res);
		assert.equal(e.code, 'invalid_param');
		assert.equal(e.param, 'taskId');
	});
});
