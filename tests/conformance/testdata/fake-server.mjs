// A stand-in for forkpoint on stdio, for harness.test.mjs: it answers bridge.mjs the way the
// tests need, one JSON-RPC message per line.
//
//   tools/call "talk"  progress twice (when the request has a progressToken), one
//                      notifications/message, then the result "done"
//   tools/call "ask"   an elicitation/create request (id "srv-1") first; the result carries
//                      the client's response to it as JSON text
//   tools/call "hang"  a notifications/message "hanging" (so the client knows it arrived),
//                      and no answer at all
//   tools/call "seen"  the requestIds of the notifications/cancelled it has received, as JSON
//   anything else      -32601
import readline from 'node:readline';

const out = (m) => process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', ...m })}\n`);
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const cancelled = [];
let asking;   // the id of the "ask" request waiting for srv-1's response

readline.createInterface({ input: process.stdin }).on('line', (line) => {
	const m = JSON.parse(line);
	if (m.method === 'notifications/cancelled') {
		cancelled.push(m.params.requestId);
		return;
	}
	if (m.id === 'srv-1' && !m.method) {
		out({ id: asking, result: text(JSON.stringify(m.result ?? m.error)) });
		return;
	}
	if (m.method !== 'tools/call') {
		if ('id' in m) out({ id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
		return;
	}
	const token = m.params?._meta?.progressToken;
	switch (m.params.name) {
	case 'talk':
		if (token !== undefined) {
			out({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2 } });
			out({ method: 'notifications/progress', params: { progressToken: token, progress: 2, total: 2 } });
		}
		out({ method: 'notifications/message', params: { level: 'info', data: 'talking' } });
		out({ id: m.id, result: text('done') });
		break;
	case 'ask':
		asking = m.id;
		out({ id: 'srv-1', method: 'elicitation/create', params: { message: 'name?', requestedSchema: { type: 'object', properties: {} } } });
		break;
	case 'hang':
		out({ method: 'notifications/message', params: { level: 'info', data: 'hanging' } });
		break;
	case 'seen':
		out({ id: m.id, result: text(JSON.stringify(cancelled)) });
		break;
	default:
		out({ id: m.id, error: { code: -32602, message: `Unknown tool: ${m.params.name}` } });
	}
});
