"""The agent's `history` query hands out copies: changing what it returned changes nothing in
the agent (tests/workflow/test_chat.py covers the query over a real server)."""

from __future__ import annotations

from datetime import UTC, datetime

from reactive_temporal.contracts.entity import AgentState, ChatMessage, SessionRef
from reactive_temporal.contracts.run import AgentConfig
from workflows.agent_entity import AgentWorkflow

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def entity_with(session_id: str, *contents: str) -> AgentWorkflow:
    """The workflow object as its handlers see it (no Temporal needed to call a query)."""
    entity = AgentWorkflow.__new__(AgentWorkflow)
    entity.state = AgentState(agent=AgentConfig(agent_id="a", model="m"))
    entity.state.sessions[session_id] = [
        ChatMessage(role="user", content=c, timestamp=NOW) for c in contents
    ]
    return entity


def test_the_history_query_returns_copies_of_the_messages():
    entity = entity_with("s1", "question 0", "question 1")
    returned = entity.history(SessionRef(session_id="s1")).messages
    returned[0].content = "changed"
    returned.append(ChatMessage(role="assistant", content="planted", timestamp=NOW))
    assert [m.content for m in entity.state.sessions["s1"]] == ["question 0", "question 1"]


def test_an_unknown_session_has_an_empty_history():
    entity = entity_with("s1", "q")
    assert entity.history(SessionRef(session_id="other")).messages == []
    assert "other" not in entity.state.sessions
