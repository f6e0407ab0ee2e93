"""The contracts between client, workflows and activities, by concern.

- `names`: every Temporal name (workflow types, signals, queries, updates, activities,
  patches) and every workflow id, written once;
- `run`: an agent's settings, a run's input, its transcript, its activities' payloads, its
  live progress;
- `debrief`: what a debrief is made from and what it says;
- `result`: what a run returns;
- `entity`: the agent entity (AgentWorkflow): chat, sessions, what runs tell it.

Importing them costs pydantic and nothing else: no Temporal client, no openai, no psycopg.
"""
