// Lifecycle: initialize through the SDK client and by hand (version negotiation), tools/list,
// logging/setLevel.
import { after, before, describe, it } from 'node:test';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';
import {
	assert, countTool, FACADE_TOOLS, REPORT_SCHEMA, reportTool, startRaw, startServer,
} from './lib.mjs';

describe('initialize and tools/list (SDK client)', () => {
	let srv;
	before(async () => {
		srv = await startServer({ tools: [reportTool('report'), countTool('count')] });
	});
	after(async () => { await srv?.close(); });

	it('reports the configured server name and declares tools', () => {
		const info = srv.client.getServerVersion();
		assert.equal(info.name, 'e2e');
		assert.equal(typeof info.version, 'string');
		const caps = srv.client.getServerCapabilities();
		assert.ok(caps.tools, `capabilities.tools: ${JSON.stringify(caps)}`);
	});

	it('lists the configured tools and the four durable_task_* tools', async () => {
		const { tools } = await srv.client.listTools();
		const names = tools.map((t) => t.name).sort();
		for (const n of ['report', 'count', ...FACADE_TOOLS])
			assert.ok(names.includes(n), `${n} missing from ${names.join(', ')}`);
		for (const t of tools) {
			assert.equal(t.inputSchema?.type, 'object', `${t.name} inputSchema`);
			assert.equal(typeof t.description, 'string', `${t.name} description`);
		}
		const report = tools.find((t) => t.name === 'report');
		assert.equal(report.title, 'Generate a report');
		assert.deepEqual(report.inputSchema.required, ['topic']);
		assert.deepEqual(report.inputSchema.properties.sections, REPORT_SCHEMA.properties.sections);
		const get = tools.find((t) => t.name === 'durable_task_get');
		assert.ok(get.inputSchema.properties?.taskId, 'durable_task_get takes taskId');
		const respond = tools.find((t) => t.name === 'durable_task_respond');
		assert.ok(respond.inputSchema.properties?.response, 'durable_task_respond takes response');
	});

	it('logging/setLevel accepts "debug" and rejects "loud" with -32602', async () => {
		assert.deepEqual(await srv.client.setLoggingLevel('debug'), {});
		await assert.rejects(
			srv.client.request({ method: 'logging/setLevel', params: { level: 'loud' } }, EmptyResultSchema),
			(e) => e instanceof McpError && e.code === -32602);
		// still serving
		assert.deepEqual(await srv.client.ping(), {});
	});
});

describe('version negotiation (raw initialize)', () => {
	for (const [asked, expected] of [['2025-06-18', '2025-06-18'], ['2025-11-25', '2025-11-25'],
		['1999-01-01', '2025-11-25']]) {
		it(`initialize with ${asked} is answered with ${expected}`, async () => {
			const raw = startRaw({ tools: [countTool()] });
			try {
				const r = await raw.initialize(asked);
				assert.equal(r.protocolVersion, expected);
				assert.equal(r.serverInfo?.name, 'e2e');
				assert.ok(r.capabilities?.tools, 'tools capability');
				const list = await raw.request(2, 'tools/list', {});
				assert.ok(list.result?.tools?.some((t) => t.name === 'count'), JSON.stringify(list));
				assert.deepEqual(raw.badLines, []);
			} finally {
				await raw.close();
			}
		});
	}
});
