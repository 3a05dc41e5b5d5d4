// The 2026-07-28 (stateless) era on the same stdio connection as the initialize-based one:
// requests that carry their protocol version and client capabilities in _meta, server/discover,
// resultType, -32021 / -32022, the io.modelcontextprotocol/tasks extension, multi round-trip
// input, and the same durable task seen through every path (extension, facade, 2025-11-25).
import { after, describe, it } from 'node:test';
import {
	assert, ISO_MS, RawServer, TASK_ID, TERMINAL, countTool, reportTool, sleep, startRaw, until,
} from './lib.mjs';

const EXT = 'io.modelcontextprotocol/tasks';
const tools = [
	reportTool('report'),
	reportTool('report-required', { taskSupport: 'required' }),
	reportTool('report-auto', { mode: 'auto', waitSeconds: 5 }),
	countTool('count-sync', { mode: 'sync' }),
];

/** params with the per-request _meta of this era. */
function p(params = {}, caps = {}) {
	return {
		...params,
		_meta: {
			'io.modelcontextprotocol/protocolVersion': '2026-07-28',
			'io.modelcontextprotocol/clientCapabilities': caps,
			...params._meta,
		},
	};
}
const withTasks = { extensions: { [EXT]: {} } };
const withTasksAndForms = { elicitation: {}, extensions: { [EXT]: {} } };

let seq = 0;
async function req(raw, method, params, caps) {
	seq += 1;
	return raw.request(`e26-${seq}`, method, p(params, caps));
}

async function getTask26(raw, taskId) {
	const r = await req(raw, 'tasks/get', { taskId }, withTasks);
	assert.ok(r.result, `tasks/get: ${JSON.stringify(r)}`);
	assert.equal(r.result.resultType, 'complete');
	return r.result;
}

async function waitTask26(raw, taskId, pred, timeoutMs = 20000) {
	let last;
	await until(async () => pred(last = await getTask26(raw, taskId)), timeoutMs,
		`task ${taskId} to reach the expected state (last: ${JSON.stringify(last)})`, 60);
	return last;
}

describe('2026-07-28 requests', () => {
	const raw = startRaw({ tools, server: { maxConcurrent: 4 } });
	after(async () => { await raw.close(); });

	it('server/discover without initialize; removed methods and bad _meta are refused', async () => {
		const d = await req(raw, 'server/discover');
		assert.equal(d.result.resultType, 'complete');
		assert.deepEqual(d.result.supportedVersions, ['2026-07-28']);
		assert.deepEqual(d.result.capabilities.extensions[EXT], {});
		assert.equal(d.result.capabilities.tasks, undefined);
		assert.equal(d.result._meta['io.modelcontextprotocol/serverInfo'].name, 'e2e');
		assert.equal(typeof d.result.ttlMs, 'number');
		for (const m of ['initialize', 'ping', 'logging/setLevel', 'tasks/result', 'tasks/list'])
			assert.equal((await req(raw, m, {}, withTasks)).error?.code, -32601, m);
		const old = await raw.request('v-old', 'server/discover', {
			_meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01', 'io.modelcontextprotocol/clientCapabilities': {} },
		});
		assert.equal(old.error.code, -32022);
		assert.deepEqual(old.error.data, { supported: ['2026-07-28'], requested: '2099-01-01' });
		const nocaps = await raw.request('v-nocaps', 'tools/list', { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } });
		assert.equal(nocaps.error.code, -32602);
		const list = await req(raw, 'tools/list');
		assert.equal(list.result.resultType, 'complete');
		assert.ok(list.result.tools.some((t) => t.name === 'report'));
	});

	it('without the extension: no task is ever returned; tasks/* and required tools answer -32021', async () => {
		const r = await req(raw, 'tools/call', { name: 'report', arguments: { topic: 'plain', sections: 1, delayMs: 10 } });
		assert.equal(r.result.resultType, 'complete');
		assert.equal(r.result.taskId, undefined);
		assert.match(r.result.structuredContent.taskId, TASK_ID);   // the facade's task handle
		const sync = await req(raw, 'tools/call', { name: 'count-sync', arguments: { n: 2 } });
		assert.equal(sync.result.resultType, 'complete');
		assert.ok(!sync.result.isError, JSON.stringify(sync.result));
		for (const [m, params] of [['tools/call', { name: 'report-required', arguments: { topic: 'x' } }],
			['tasks/get', { taskId: r.result.structuredContent.taskId }],
			['tasks/update', { taskId: 'x', inputResponses: {} }], ['tasks/cancel', { taskId: 'x' }]]) {
			const e = await req(raw, m, params);
			assert.equal(e.error?.code, -32021, `${m}: ${JSON.stringify(e)}`);
			assert.deepEqual(e.error.data.requiredCapabilities.extensions[EXT], {});
		}
	});

	it('with the extension: a flat CreateTaskResult, then tasks/get inlines the result; every path agrees', async () => {
		const c = await req(raw, 'tools/call', { name: 'report', arguments: { topic: 'ext', sections: 2, delayMs: 150 } }, withTasks);
		const t = c.result;
		assert.equal(t.resultType, 'task');
		assert.match(t.taskId, TASK_ID);
		assert.equal(t.task, undefined);
		assert.match(t.createdAt, ISO_MS);
		assert.ok(Number.isInteger(t.ttlMs) && Number.isInteger(t.pollIntervalMs));
		for (const k of ['result', 'error', 'inputRequests', 'ttl', 'pollInterval', 'requestState'])
			assert.ok(!(k in t), `CreateTaskResult carries ${k}`);
		// The facade (from a client without the extension) and the 2025-11-25 task API of an
		// initialized session on the same connection report the same task in the same state.
		await raw.initialize('2025-11-25');
		const facade = await req(raw, 'tools/call', { name: 'durable_task_get', arguments: { taskId: t.taskId } });
		const native = await raw.request('native-get', 'tasks/get', { taskId: t.taskId });
		const ext = await getTask26(raw, t.taskId);
		assert.equal(facade.result.structuredContent.status, ext.status);
		assert.equal(native.result.status, ext.status);
		assert.equal(native.result.createdAt, ext.createdAt);
		const done = await waitTask26(raw, t.taskId, (x) => TERMINAL.has(x.status));
		assert.equal(done.status, 'completed');
		assert.equal(done.result.structuredContent.topic, 'ext');
		assert.equal(done.result._meta?.['io.modelcontextprotocol/related-task'], undefined);
		const f2 = await req(raw, 'tools/call', { name: 'durable_task_get', arguments: { taskId: t.taskId } });
		assert.equal(f2.result.structuredContent.status, 'completed');
		assert.deepEqual(f2.result.structuredContent.result, done.result.structuredContent);
	});

	it('a question shows as inputRequests; tasks/update answers it (partial and unknown keys are acked)', async () => {
		const c = await req(raw, 'tools/call', { name: 'report', arguments: { topic: 'q', sections: 2, delayMs: 50, ask: true } }, withTasks);
		const id = c.result.taskId;
		const asking = await waitTask26(raw, id, (x) => x.status === 'input_required' || TERMINAL.has(x.status));
		assert.equal(asking.status, 'input_required');
		const [key] = Object.keys(asking.inputRequests);
		assert.equal(key, 'include-appendix');
		const ir = asking.inputRequests[key];
		assert.equal(ir.method, 'elicitation/create');
		assert.equal(ir.params.message, 'Include an appendix?');
		assert.deepEqual(ir.params.requestedSchema.properties.response.enum, ['yes', 'no']);
		const facade = await req(raw, 'tools/call', { name: 'durable_task_get', arguments: { taskId: id } });
		assert.equal(facade.result.structuredContent.inputRequest.questionId, key);
		const other = await req(raw, 'tasks/update', { taskId: id, inputResponses: { 'not-asked': { action: 'accept', content: {} } } }, withTasks);
		assert.deepEqual(Object.keys(other.result).sort(), ['_meta', 'resultType']);
		assert.equal((await getTask26(raw, id)).status, 'input_required');
		const ack = await req(raw, 'tasks/update', { taskId: id, inputResponses: { [key]: { action: 'accept', content: { response: 'yes' } } } }, withTasks);
		assert.equal(ack.result.resultType, 'complete');
		const done = await waitTask26(raw, id, (x) => TERMINAL.has(x.status));
		assert.equal(done.status, 'completed');
		assert.equal(done.result.structuredContent.appendix, true);
	});

	it('multi round-trip: a waiting call that hits a question returns InputRequiredResult, the retry resumes it', async () => {
		const first = await req(raw, 'tools/call', { name: 'report-auto', arguments: { topic: 'mrtr', sections: 2, delayMs: 20, ask: true } }, withTasksAndForms);
		const r1 = first.result;
		assert.equal(r1.resultType, 'input_required', JSON.stringify(first));
		assert.equal(r1.taskId, undefined);
		assert.ok(typeof r1.requestState === 'string' && r1.inputRequests['include-appendix']);
		const bad = await req(raw, 'tools/call', { name: 'report-auto', arguments: {}, requestState: 'forged', inputResponses: {} }, withTasksAndForms);
		assert.equal(bad.error?.code, -32602);
		const second = await req(raw, 'tools/call', {
			name: 'report-auto', arguments: { topic: 'mrtr', sections: 2, delayMs: 20, ask: true },
			requestState: r1.requestState,
			inputResponses: { 'include-appendix': { action: 'accept', content: { response: 'no' } } },
		}, withTasksAndForms);
		assert.equal(second.result.resultType, 'complete', JSON.stringify(second));
		assert.equal(second.result.structuredContent.appendix, false);
	});

	it('tasks/cancel acks with an empty result, also on a finished task; unknown ids are -32602', async () => {
		const c = await req(raw, 'tools/call', { name: 'report', arguments: { topic: 'c', sections: 10, delayMs: 5000 } }, withTasks);
		const id = c.result.taskId;
		const ack = await req(raw, 'tasks/cancel', { taskId: id }, withTasks);
		assert.deepEqual(Object.keys(ack.result).sort(), ['_meta', 'resultType']);
		assert.equal((await waitTask26(raw, id, (x) => TERMINAL.has(x.status))).status, 'cancelled');
		assert.equal((await req(raw, 'tasks/cancel', { taskId: id }, withTasks)).result.resultType, 'complete');
		for (const m of ['tasks/get', 'tasks/cancel'])
			assert.equal((await req(raw, m, { taskId: 'no-such-task' }, withTasks)).error?.code, -32602, m);
	});

	it('a task created through the extension survives a restart of forkpoint', async () => {
		const srv = startRaw({ tools });
		let r2;
		try {
			const c = await req(srv, 'tools/call', { name: 'report', arguments: { topic: 'restart', sections: 3, delayMs: 300 } }, withTasks);
			const id = c.result.taskId;
			srv.closeStdin();
			assert.ok(await srv.waitExit(5000), 'forkpoint did not exit at the end of its input');
			await sleep(50);
			r2 = new RawServer({ cfgPath: srv.cfgPath, stateDir: srv.stateDir });
			const done = await waitTask26(r2, id, (x) => TERMINAL.has(x.status));
			assert.equal(done.status, 'completed');
			assert.equal(done.result.structuredContent.topic, 'restart');
		} finally {
			await r2?.kill();
			await srv.close();
		}
	});
});
