"""The attribute, event and metric names tooldeck's telemetry uses, in one place.

The OpenTelemetry GenAI semantic conventions name most of what a turn carries
(``gen_ai.*``); they come from ``opentelemetry-semantic-conventions`` so that a renamed
attribute shows up as an import error, not as a silently different trace. Only what the
conventions do not cover (tiers, repairs, policy decisions, approvals, offload, the
workflow run) is named here under ``tooldeck.*``.
"""

from __future__ import annotations

from typing import Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as _gen_ai_metrics
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE as _ERROR_TYPE

# -- the GenAI conventions ---------------------------------------------------------------------
OPERATION: Final = _gen_ai.GEN_AI_OPERATION_NAME
PROVIDER: Final = _gen_ai.GEN_AI_PROVIDER_NAME
REQUEST_MODEL: Final = _gen_ai.GEN_AI_REQUEST_MODEL
REQUEST_MAX_TOKENS: Final = _gen_ai.GEN_AI_REQUEST_MAX_TOKENS
REQUEST_TEMPERATURE: Final = _gen_ai.GEN_AI_REQUEST_TEMPERATURE
RESPONSE_MODEL: Final = _gen_ai.GEN_AI_RESPONSE_MODEL
RESPONSE_ID: Final = _gen_ai.GEN_AI_RESPONSE_ID
FINISH_REASONS: Final = _gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
INPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
CACHE_READ_TOKENS: Final = _gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
CACHE_WRITE_TOKENS: Final = _gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
REASONING_TOKENS: Final = _gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
CONVERSATION_ID: Final = _gen_ai.GEN_AI_CONVERSATION_ID
AGENT_NAME: Final = _gen_ai.GEN_AI_AGENT_NAME
WORKFLOW_NAME: Final = _gen_ai.GEN_AI_WORKFLOW_NAME
TOOL_NAME: Final = _gen_ai.GEN_AI_TOOL_NAME
TOOL_CALL_ID: Final = _gen_ai.GEN_AI_TOOL_CALL_ID
TOOL_TYPE: Final = _gen_ai.GEN_AI_TOOL_TYPE
TOKEN_TYPE: Final = _gen_ai.GEN_AI_TOKEN_TYPE
# content (recorded only when content capture is on)
INPUT_MESSAGES: Final = _gen_ai.GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES: Final = _gen_ai.GEN_AI_OUTPUT_MESSAGES
SYSTEM_INSTRUCTIONS: Final = _gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS
TOOL_CALL_ARGUMENTS: Final = _gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_CALL_RESULT: Final = _gen_ai.GEN_AI_TOOL_CALL_RESULT

ERROR_TYPE: Final = _ERROR_TYPE

CHAT: Final = _gen_ai.GenAiOperationNameValues.CHAT.value
INVOKE_AGENT: Final = _gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value
EXECUTE_TOOL: Final = _gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
INVOKE_WORKFLOW: Final = _gen_ai.GenAiOperationNameValues.INVOKE_WORKFLOW.value

# -- metrics ----------------------------------------------------------------------------------
TOKEN_USAGE_METRIC: Final = _gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE
DURATION_METRIC: Final = _gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION
TOOL_CALLS_METRIC: Final = "tooldeck.tool.calls"
# the bucket boundaries the GenAI metric conventions recommend
TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip

# -- tooldeck's own ---------------------------------------------------------------------------
SESSION_ID: Final = "tooldeck.session.id"
STEP: Final = "tooldeck.step"
STEPS: Final = "tooldeck.turn.steps"
STOP_REASON: Final = "tooldeck.turn.stop_reason"
STREAMED: Final = "tooldeck.turn.streamed"
TOOL_CALLS: Final = "tooldeck.response.tool_calls"
TOOL_TIER: Final = "tooldeck.tool.tier"
TOOL_MODE: Final = "tooldeck.tool.execution_mode"
TOOL_REPAIRS: Final = "tooldeck.tool.repairs"
TOOL_OUTCOME: Final = "tooldeck.tool.outcome"
MCP_SERVER: Final = "tooldeck.mcp.server"
POLICY_ACTION: Final = "tooldeck.policy.action"
POLICY_LEVEL: Final = "tooldeck.policy.level"
POLICY_RULE: Final = "tooldeck.policy.rule"
APPROVAL_CALLS: Final = "tooldeck.approval.calls"
APPROVAL_TOOLS: Final = "tooldeck.approval.tools"
APPROVED: Final = "tooldeck.approval.approved"
EDITED: Final = "tooldeck.approval.edited"
APPROVED_BY: Final = "tooldeck.approval.by"
APPROVAL_OUTCOME: Final = "tooldeck.approval.outcome"
REF_ID: Final = "tooldeck.offload.ref_id"
ORIGINAL_TOKENS: Final = "tooldeck.result.original_tokens"
SHOWN_TOKENS: Final = "tooldeck.result.shown_tokens"
TOTAL_CHARS: Final = "tooldeck.result.total_chars"
SHOWN_CHARS: Final = "tooldeck.result.shown_chars"
WORKFLOW_ID: Final = "tooldeck.workflow.id"
WORKFLOW_TASK: Final = "tooldeck.workflow.task"
WORKFLOW_WORKER: Final = "tooldeck.workflow.worker"
TASK_STATE: Final = "tooldeck.workflow.task.state"
TASK_ATTEMPTS: Final = "tooldeck.workflow.task.attempts"

# span names that are not GenAI operations, and span events
APPROVAL_SPAN: Final = "tooldeck.approval"
TASK_SPAN: Final = "tooldeck.workflow.task"
POLICY_EVENT: Final = "tooldeck.policy.decision"
APPROVAL_REQUESTED_EVENT: Final = "tooldeck.approval.requested"
APPROVAL_ANSWERED_EVENT: Final = "tooldeck.approval.answered"
APPROVAL_PENDING_EVENT: Final = "tooldeck.approval.pending"
OFFLOAD_EVENT: Final = "tooldeck.result.offloaded"
GUARD_EVENT: Final = "tooldeck.result.guarded"

# the outcomes a tool call is counted by (``tooldeck.tool.outcome``)
OUTCOMES: Final = ("ok", "error", "denied", "timed_out", "cancelled", "not_run")

INSTRUMENTATION: Final = "tooldeck"
