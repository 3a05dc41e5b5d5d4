// A job written in shell (runner/examples/shell-report.sh) speaking the protocol through the
// forkpoint-job helper, which the supervisor puts on the job's PATH.
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
	assert, call, getTask, helper, isStatus, marker, pidsWithMarker, RawServer, rawToolResult,
	SHELL_REPORT, startRaw, startServer, startTask, stubbornTool, until, waitGone, waitTask,
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

// The supervisor is SIGKILLed while a job and its children run: they must go promptly, not
// carry on beside the attempt that the next supervisor resumes.
describe('supervisor death ends the job tree', () => {
	// A shell job under profile none with three children (two in the background); every
	// process carries the marker in its argv.
	const sleeper = helper('sleeper');
	const script = `"${sleeper}" 300 - "$1" & "${sleeper}" 300 - "$1" & "${sleeper}" 300 - "$1"; wait`;
	const noneTool = {
		name: 'family',
		description: 'A shell with children, unconfined.',
		inputSchema: { type: 'object', properties: { mark: { type: 'string' } }, required: ['mark'] },
		command: ['/bin/sh', '-c', script, 'sh', '{mark}'],
		sandbox: { profile: 'none' },
	};

	async function killSupervisorDuring(tool, mark, count) {
		const raw = startRaw({ tools: [tool] });
		let pids = [];
		try {
			await raw.initialize();
			const r = await raw.request(1, 'tools/call', { name: tool.name, arguments: { mark } });
			assert.ok(!rawToolResult(r).isError, JSON.stringify(r));
			pids = await until(() => { const p = pidsWithMarker(mark); return p.length >= count ? p : null; },
				10000, `${count} job processes to run`);
			await raw.kill();
			return await waitGone(pids, 2000, 'job tree after the supervisor died');
		} finally {
			await raw.close();
		}
	}

	it('profile none: the job and its children are gone within 2 s of a SIGKILL', async () => {
		const ms = await killSupervisorDuring(noneTool, marker('orphan'), 4);
		assert.ok(ms < 2000, `gone after ${ms} ms`);
	});

	it('profile none: a job that signals its own group still dies with the supervisor', async () => {
		// `kill -TERM 0` reaches the whole process group; the job itself ignores it.
		const trapScript = `trap '' TERM; kill -TERM 0; ${script}`;
		const tool = { ...noneTool, name: 'family-kill0', command: ['/bin/sh', '-c', trapScript, 'sh', '{mark}'] };
		await killSupervisorDuring(tool, marker('kill0'), 4);
	});

	it('profile none: exit status, output and cancel work through the keeper', async () => {
		const srv = await startServer({
			tools: [
				{ ...noneTool, name: 'seven', command: ['/bin/sh', '-c', 'echo "ppid $PPID"; exit 7'] },
				noneTool,
			],
		});
		try {
			const h = await startTask(srv.client, 'seven', { mark: 'x' });
			const t = await waitTask(srv.client, h.taskId, isStatus('failed'), { timeoutMs: 10000 });
			assert.equal(t.error.exitCode, 7, JSON.stringify(t.error));
			assert.match(t.error.output, /ppid \d+/);
			assert.doesNotMatch(t.error.output, new RegExp(`ppid ${srv.pid}\\b`), 'the parent is the keeper');
			const mark = marker('cancel');
			const c = await startTask(srv.client, 'family', { mark });
			const pids = await until(() => { const p = pidsWithMarker(mark); return p.length >= 4 ? p : null; },
				10000, 'the job and its children');
			const r = await call(srv.client, 'durable_task_cancel', { taskId: c.taskId });
			assert.ok(!r.isError, JSON.stringify(r.structuredContent));
			await waitGone(pids, 4000, 'cancelled none job tree');
			await waitTask(srv.client, c.taskId, isStatus('cancelled'));
		} finally {
			await srv.close();
		}
	});

	it('profile default: the jail init and its whole tree (a setsid escapee too) are gone', async () => {
		await killSupervisorDuring(stubbornTool('stubborn'), marker('jail'), 2);
	});
});

// The documented restore idiom across a supervisor SIGKILL: the next supervisor resumes the
// shell job from its checkpoint, and no step up to that checkpoint runs again.
describe('shell job resumed after a supervisor SIGKILL', () => {
	for (const profile of ['default', 'none']) {
		it(`profile ${profile}: resumes from the checkpoint, no acknowledged step runs twice`, async () => {
			const tool = { name: 'shell-report', inputSchema: { type: 'object' }, command: [SHELL_REPORT],
				sandbox: { profile } };
			const first = startRaw({ tools: [tool] });
			let second;
			try {
				await first.initialize();
				const h = rawToolResult(await first.request(1, 'tools/call', { name: 'shell-report', arguments: {} }));
				const id = h.structuredContent.taskId;
				// Step 2's progress comes after checkpoint 1 was acknowledged.
				let n = 10;
				await until(async () => {
					const g = await first.request(n++, 'tools/call', { name: 'durable_task_get', arguments: { taskId: id } });
					return (g.result?.structuredContent?.progress?.fraction ?? 0) >= 0.4;
				}, 20000, 'step 2');
				await first.kill();
				second = new RawServer({ cfgPath: first.cfgPath, stateDir: first.stateDir });
				await second.initialize();
				let t;
				await until(async () => {
					const g = await second.request(n++, 'tools/call', { name: 'durable_task_get', arguments: { taskId: id } });
					t = g.result?.structuredContent;
					return t && ['completed', 'failed', 'cancelled'].includes(t.status);
				}, 30000, 'the resumed task to finish');
				assert.equal(t.status, 'completed', JSON.stringify(t));
				assert.equal(t.result.steps, 5);
				const from = t.result.resumedFrom;
				assert.ok(from >= 1, `resumed from checkpoint ${from}`);
				const log = fs.readFileSync(path.join(first.stateDir, 'tasks', id, 'output.log'), 'utf8');
				const after = log.slice(log.indexOf('resumed at step'));
				assert.ok(log.includes(`resumed at step ${from + 1} of 5`), log);
				for (let k = 1; k <= from; k++)
					assert.ok(!after.includes(`step ${k}/5 done`), `step ${k} ran again after the resume:\n${log}`);
			} finally {
				await second?.kill();
				await first.close();
			}
		});
	}
});
