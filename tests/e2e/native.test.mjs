// MCP's native task API (2025-11-25) through the SDK's experimental task client, on the same
// durable tasks the facade tools see.
import { describe, it, after } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import {
	assert, BIN, writeConfig, reportTool, countTool, TASK_ID, ISO_MS, TERMINAL, call, getTask, sleep,
} from './lib.mjs';

const tools = [
	reportTool('report', { resume: 'checkpoint' }),
	reportTool('report-required', { taskSupport: 'required' }),
	countTool('count-sync', { mode: 'sync' }),
];

async function connect(cfgPath, stateDir, capabilities = {}) {
	const transport = new StdioClientTransport({ command: BIN, args: ['mcp', '--config', cfgPath, '--state', stateDir], stderr: 'pipe' });
	const client = new Client({ name: 'e2e-native', version: '1' }, { capabilities });
	await client.connect(transport);
	return { client, transport };
}

async function drain(stream) {
	const events = [];
	for await (const ev of stream) events.push(ev);
	return events;
}

describe('native tasks (2025-11-25)', () => {
	const { cfgPath, stateDir } = writeConfig({ tools, server: { maxConcurrent: 4 } });
	const open = [];
	after(async () => { for (const c of open) await c.client.close().catch(() => {}); });

	it('declares the tasks capability and per-tool taskSupport', async () => {
		const c = await connect(cfgPath, stateDir);
		open.push(c);
		const caps = c.client.getServerCapabilities();
		assert.ok(caps.tasks && caps.tasks.list && caps.tasks.cancel && caps.tasks.requests.tools.call);
		const { tools: list } = await c.client.listTools();
		const by = Object.fromEntries(list.map((t) => [t.name, t]));
		assert.equal(by.report.execution.taskSupport, 'optional');
		assert.equal(by['report-required'].execution.taskSupport, 'required');
		assert.equal(by['count-sync'].execution.taskSupport, 'forbidden');
		assert.equal(by.durable_task_get.execution, undefined);
	});

	it('callToolStream: taskCreated, statuses, the result; facade sees the same task', async () => {
		const c = open[0];
		const events = await drain(c.client.experimental.tasks.callToolStream(
			{ name: 'report', arguments: { topic: 'native', sections: 2, delayMs: 100 } }, CallToolResultSchema, { task: { ttl: 60000 } }));
		const created = events.find((e) => e.type === 'taskCreated');
		assert.ok(created, JSON.stringify(events));
		assert.match(created.task.taskId, TASK_ID);
		assert.match(created.task.createdAt, ISO_MS);
		const result = events.find((e) => e.type === 'result');
		assert.ok(result, JSON.stringify(events).slice(0, 500));
		assert.equal(result.result.structuredContent.topic, 'native');
		assert.equal(result.result._meta['io.modelcontextprotocol/related-task'].taskId, created.task.taskId);
		// The facade path reports the same task in the same state.
		const f = await getTask(c.client, created.task.taskId);
		assert.equal(f.status, 'completed');
		assert.deepEqual(f.result, result.result.structuredContent);
		const n = await c.client.experimental.tasks.getTask(created.task.taskId);
		assert.equal(n.status, 'completed');
		const l = await c.client.experimental.tasks.listTasks();
		assert.ok(l.tasks.some((t) => t.taskId === created.task.taskId && t.status === 'completed'));
	});

	it('a facade-created task is visible natively, and cancel works both ways', async () => {
		const c = open[0];
		const h = await call(c.client, 'report', { topic: 'x', sections: 5, delayMs: 5000 });
		const id = h.structuredContent.taskId;
		const n = await c.client.experimental.tasks.getTask(id);
		assert.equal(n.status, 'working');
		const cancelled = await c.client.experimental.tasks.cancelTask(id);
		assert.equal(cancelled.status, 'cancelled');
		assert.equal((await getTask(c.client, id)).status, 'cancelled');
		await assert.rejects(c.client.experimental.tasks.cancelTask(id), /-32602|terminal|already/i);
		await assert.rejects(c.client.experimental.tasks.getTask('0'.repeat(32)), /-32602|Unknown/i);
	});

	it('forbidden and required tools answer -32601 as the spec says', async () => {
		const c = open[0];
		await assert.rejects(drain(c.client.experimental.tasks.callToolStream(
			{ name: 'count-sync', arguments: { n: 1 } }, CallToolResultSchema, { task: {} })).then((ev) => {
			const e = ev.find((x) => x.type === 'error');
			if (e) throw e.error;
		}), /-32601|does not support/);
		// The SDK refuses this call itself; send it as a raw request to see the server's answer.
		await assert.rejects(c.client.request({ method: 'tools/call', params: { name: 'report-required', arguments: { topic: 'x' } } },
			CallToolResultSchema), /-32601|must be called as a task/);
	});

	it('a question becomes an elicitation tagged with the task; the answer resumes the job', async () => {
		// One supervisor per state dir: close the first before starting the next.
		await open.shift().client.close();
		const c = await connect(cfgPath, stateDir, { elicitation: {} });
		open.push(c);
		let seen;
		c.client.setRequestHandler(ElicitRequestSchema, async (req) => {
			seen = req.params;
			return { action: 'accept', content: { response: 'yes' } };
		});
		const events = await drain(c.client.experimental.tasks.callToolStream(
			{ name: 'report', arguments: { topic: 'q', sections: 2, delayMs: 60, ask: true } }, CallToolResultSchema, { task: {} }));
		const result = events.find((e) => e.type === 'result');
		assert.ok(result, JSON.stringify(events).slice(0, 800));
		assert.equal(result.result.structuredContent.appendix, true);
		assert.ok(seen, 'no elicitation request reached the client');
		assert.equal(seen.message, 'Include an appendix?');
		assert.deepEqual(seen.requestedSchema.properties.response.enum, ['yes', 'no']);
		const created = events.find((e) => e.type === 'taskCreated');
		assert.equal(seen._meta['io.modelcontextprotocol/related-task'].taskId, created.task.taskId);
	});

	it('a tasks/result that times out (and is cancelled by the client) leaves the task running', async () => {
		const c = open[0];
		const stream = c.client.experimental.tasks.callToolStream(
			{ name: 'report', arguments: { topic: 'slow-wait', sections: 3, delayMs: 300 } }, CallToolResultSchema, { task: {} });
		const first = await stream.next();
		assert.equal(first.value.type, 'taskCreated');
		const id = first.value.task.taskId;
		stream.return?.();
		// The SDK sends notifications/cancelled for the tasks/result request when its timeout fires.
		await assert.rejects(c.client.experimental.tasks.getTaskResult(id, CallToolResultSchema, { timeout: 150 }),
			/timed out|timeout/i);
		const mid = await c.client.experimental.tasks.getTask(id);
		assert.equal(mid.status, 'working', JSON.stringify(mid));
		const r = await c.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
		assert.equal(r.structuredContent.topic, 'slow-wait');
		const t = await c.client.experimental.tasks.getTask(id);
		assert.equal(t.status, 'completed');
	});

	it('survives a restart between task creation and tasks/result', async () => {
		await open.shift().client.close();
		let c = await connect(cfgPath, stateDir);
		const stream = c.client.experimental.tasks.callToolStream(
			{ name: 'report', arguments: { topic: 'restart', sections: 4, delayMs: 300 } }, CallToolResultSchema, { task: {} });
		const first = await stream.next();
		assert.equal(first.value.type, 'taskCreated');
		const id = first.value.task.taskId;
		await c.client.close();   // the server exits; its job is stopped with it
		await sleep(100);
		c = await connect(cfgPath, stateDir);
		open.push(c);
		const r = await c.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
		assert.equal(r.structuredContent.topic, 'restart');
		assert.equal(r.structuredContent.sections, 4);
		const t = await c.client.experimental.tasks.getTask(id);
		assert.ok(TERMINAL.has(t.status));
	});
});
