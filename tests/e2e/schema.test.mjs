// JSON Schema 2020-12 in a tool's inputSchema, end to end through the SDK client: the schema is
// listed as configured, arguments are checked against patterns, formats, anyOf and a recursive
// $ref with the failing field named, a backtracking pattern stops at PCRE2's match limit without
// stalling the server, and schemas that cannot work stop start-up with their path.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import {
	assert, BIN, call, envelopeOf, example, startServer, writeConfig,
} from './lib.mjs';

const SCHEMA = {
	$schema: 'https://json-schema.org/draft/2020-12/schema',
	type: 'object',
	$defs: {
		section: {
			type: 'object',
			properties: {
				title: { type: 'string', pattern: '^[A-Z]' },
				children: { type: 'array', items: { $ref: '#/$defs/section' } },
			},
			required: ['title'],
			additionalProperties: false,
		},
	},
	properties: {
		topic: { type: 'string', pattern: '^[a-z][a-z0-9-]{2,}$' },
		sections: { type: 'integer', minimum: 1, maximum: 10, multipleOf: 1, default: 3 },
		delayMs: { type: 'integer', minimum: 0, default: 10 },
		due: { type: 'string', format: 'date-time' },
		owner: { anyOf: [{ type: 'string', format: 'email' }, { type: 'null' }] },
		outline: { $ref: '#/$defs/section' },
		slow: { type: 'string', pattern: '^(a+)+$' },
	},
	required: ['topic'],
	additionalProperties: false,
};

const tool = { name: 'report', description: 'Writes a report.', inputSchema: SCHEMA,
	command: [example('report-generator')] };

describe('JSON Schema 2020-12 tool arguments', () => {
	let srv;
	before(async () => { srv = await startServer({ tools: [tool] }); });
	after(async () => { await srv?.close(); });

	it('tools/list shows the schema as configured', async () => {
		const { tools } = await srv.client.listTools();
		assert.deepEqual(tools.find((t) => t.name === 'report').inputSchema, SCHEMA);
	});

	it('valid arguments start a task', async () => {
		const res = await call(srv.client, 'report', {
			topic: 'otters', due: '2026-12-01T10:45:38Z', owner: null,
			outline: { title: 'Intro', children: [{ title: 'Why', children: [] }] },
		});
		assert.ok(!res.isError, JSON.stringify(res));
		assert.ok(res.structuredContent.taskId);
	});

	const cases = [
		['a pattern', { topic: 'Otters' }, 'topic', /^topic: must match the pattern \^\[a-z\]/],
		['a format', { topic: 'otters', due: 'tomorrow' }, 'due', /^due: must be a date-time \(RFC 3339/],
		['anyOf', { topic: 'otters', owner: 'nobody' }, 'owner',
			/^owner: must match at least one schema in anyOf: \[0\] must be an email address; \[1\] must be null$/],
		['a recursive $ref', { topic: 'otters', outline: { title: 'A', children: [{ title: 'b' }] } },
			'outline.children[0].title', /^outline\.children\[0\]\.title: must match the pattern \^\[A-Z\]$/],
		['additionalProperties', { topic: 'otters', extra: 1 }, 'extra', /^extra: unknown field/],
	];
	for (const [what, args, field, message] of cases) {
		it(`${what}: invalid_arguments naming the field`, async () => {
			const e = envelopeOf(await call(srv.client, 'report', args));
			assert.equal(e.code, 'invalid_arguments');
			assert.equal(e.param, field, JSON.stringify(e));
			assert.match(e.message, message);
		});
	}

	it('a pattern that backtracks without end stops at the match limit; the server stays responsive', async () => {
		const t0 = Date.now();
		const e = envelopeOf(await call(srv.client, 'report', { topic: 'otters', slow: `${'a'.repeat(40)}!` }));
		assert.equal(e.code, 'invalid_arguments');
		assert.equal(e.param, 'slow');
		assert.match(e.message, /^slow: validation stopped: the pattern \^\(a\+\)\+\$ needs too much backtracking on this value \(match limit\)$/);
		assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
		await srv.client.ping();
	});
});

describe('schemas that cannot work stop start-up, naming their path', () => {
	const cases = [
		[{ type: 'object', properties: { id: { type: 'string', pattern: '^(a' } } },
			'tools[0].inputSchema.properties.id.pattern: invalid regular expression at offset 3: missing closing parenthesis'],
		[{ type: 'object', properties: { a: { $ref: '#/$defs/missing' } } },
			'tools[0].inputSchema.properties.a.$ref: "#/$defs/missing" names nothing in the schema'],
		[{ type: 'object', $defs: { a: { allOf: [{ $ref: '#/$defs/a' }] } }, properties: { x: { $ref: '#/$defs/a' } } },
			'tools[0].inputSchema.$defs.a.allOf[0].$ref: makes a cycle'],
		[{ type: 'object', unevaluatedProperties: false },
			'tools[0].inputSchema.unevaluatedProperties: unsupported keyword "unevaluatedProperties"'],
	];
	for (const [schema, want] of cases) {
		it(want.split(':')[0] + ': ' + want.split(': ')[1], () => {
			const { dir, cfgPath, stateDir } = writeConfig({ tools: [{ ...tool, inputSchema: schema }] });
			try {
				const r = spawnSync(BIN, ['mcp', '--config', cfgPath, '--state', stateDir],
					{ encoding: 'utf8', timeout: 20000, input: '' });
				assert.equal(r.status, 1, r.stderr);
				assert.ok(r.stderr.includes(want), r.stderr);
				assert.equal(r.stdout, '');
			} finally {
				fs.rmSync(dir, { recursive: true, force: true });
			}
		});
	}
});
