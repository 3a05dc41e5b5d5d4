#!/bin/sh
# Prints the forkpoint config that gives the conformance scenarios their fixture tools.
#
#   make-config.sh FIXTURE_DIR > config.json
#
# FIXTURE_DIR holds the fixture jobs built from tests/conformance/fixtures/*.c ($BUILD/conformance);
# it must be an absolute path.  Each tool's name, arguments and behaviour are the ones the
# scenario descriptions of @modelcontextprotocol/conformance ask for (tests/conformance/README.md).
set -eu
dir=${1:?usage: make-config.sh FIXTURE_DIR}
case $dir in
/*) ;;
*) echo "make-config.sh: FIXTURE_DIR must be absolute" >&2; exit 2 ;;
esac
for f in content timed asking; do
	[ -x "$dir/$f" ] || { echo "make-config.sh: $dir/$f is missing (make conformance builds it)" >&2; exit 1; }
done

# tool NAME MODE DESCRIPTION PROPERTIES REQUIRED COMMAND [EXTRA]
tool() {
	printf '    {\n      "name": "%s",\n      "description": "%s",\n' "$1" "$3"
	printf '      "inputSchema": { "type": "object", "properties": { %s }, "required": [%s] },\n' "$4" "$5"
	printf '      "command": [%s],\n      "mode": "%s",\n      "timeoutSeconds": 120%s\n    }' "$6" "$2" "${7:-}"
}

cat <<HEAD
{
  "server": { "name": "forkpoint-conformance", "maxConcurrent": 32, "cancelGraceSeconds": 1 },
  "tools": [
HEAD
{
tool test_simple_text sync "Returns a fixed text block." "" "" "\"$dir/content\", \"text\""
echo ,
tool test_image_content sync "Returns a 1x1 PNG image." "" "" "\"$dir/content\", \"image\""
echo ,
tool test_audio_content sync "Returns a tiny WAV clip." "" "" "\"$dir/content\", \"audio\""
echo ,
tool test_embedded_resource sync "Returns an embedded text resource." "" "" "\"$dir/content\", \"resource\""
echo ,
tool test_multiple_content_types sync "Returns text, an image and a resource." "" "" "\"$dir/content\", \"mixed\""
echo ,
tool test_error_handling sync "Always reports a tool error (isError)." "" "" "\"$dir/content\", \"error\""
echo ,
tool test_tool_with_progress sync "Reports progress three times, about 0.3 s in all." "" "" "\"$dir/timed\", \"progress\""
echo ,
tool test_tool_with_logging sync "Writes three info log lines, about 0.15 s in all." "" "" "\"$dir/timed\", \"logging\""
echo ,
tool test_elicitation sync "Asks the user the given message and reports the answer." \
	'"message": { "type": "string" }' '"message"' "\"$dir/asking\", \"elicit\", \"{message}\""
echo ,
tool greet sync "Greets a name at once." '"name": { "type": "string", "default": "World" }' "" \
	"\"$dir/content\", \"greet\", \"{name}\""
echo ,
tool slow_compute task "Sleeps the given number of seconds, then reports. Stops at once when cancelled." \
	'"seconds": { "type": "number", "minimum": 0, "maximum": 600, "default": 1 }, "label": { "type": "string", "default": "" }' "" \
	"\"$dir/timed\", \"slow\", \"{seconds}\", \"{label}\""
echo ,
tool failing_job task "After about a second, reports a tool error (isError). Runs only as a task." "" "" \
	"\"$dir/timed\", \"failing\"" ', "taskSupport": "required"'
echo ,
tool protocol_error_job task "Breaks down after a moment: the task fails." "" "" "\"$dir/timed\", \"protocol-error\""
echo ,
tool confirm_delete task "Asks whether to delete the file, then reports the answer." \
	'"filename": { "type": "string" }' '"filename"' "\"$dir/asking\", \"confirm\", \"{filename}\""
echo ,
tool multi_input task "Asks two questions, one after the other, then reports both answers." "" "" "\"$dir/asking\", \"two\""
echo ,
tool test_tool_with_task auto "Asks for the user's name, then works for 4 s before greeting. Runs only as a task." "" "" \
	"\"$dir/asking\", \"name\", \"4\"" ', "waitSeconds": 2, "taskSupport": "required"'
echo ,
# The json-schema-2020-12 scenario's schema, as the scenario gives it: $defs with an $anchor,
# $ref, allOf/anyOf, if/then/else, additionalProperties.
cat <<TOOL
    {
      "name": "json_schema_2020_12_tool",
      "description": "Takes a contact (a name, an address, a phone or an email) and answers with a fixed text.",
      "inputSchema": {
        "\$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "\$defs": {
          "address": {
            "\$anchor": "addressDef",
            "type": "object",
            "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
          }
        },
        "properties": {
          "name": { "type": "string" },
          "address": { "\$ref": "#/\$defs/address" },
          "contactMethod": { "type": "string", "enum": ["phone", "email"] },
          "phone": { "type": "string" },
          "email": { "type": "string" }
        },
        "allOf": [ { "anyOf": [ { "required": ["phone"] }, { "required": ["email"] } ] } ],
        "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
      },
      "command": ["$dir/content", "text"],
      "mode": "sync",
      "timeoutSeconds": 120
    }
TOOL
}
cat <<TAIL
  ]
}
TAIL
