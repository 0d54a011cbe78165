"""Agent completions: an agent answers a question through an OpenAI-compatible model
endpoint (vLLM, Ollama, llama.cpp's server, TGI …), using its skills as tools.

The loop: the model gets the conversation and the agent's tools (the same ones MCP serves at
/mcp/projects/<p>/agents/<a>); each tool call it makes runs through those tools — so every
statement passes the skill's table check, the gate and the caller's rights — and its result
goes back to the model, until the model answers. At most AGENT_MAX_STEPS model calls and
AGENT_TIMEOUT_S in all. The answer carries the statements that ran, so that a user can check
where it came from.

The endpoint is the agent's own (``model``: ``base_url``, ``model_name``, ``api_key``, or the
same keys in ``params``) or the defaults LLM_BASE_URL / LLM_MODEL / LLM_API_KEY. The key
is sent to the endpoint only: never in an answer, an error or a log line.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app

from ..errors import QuarryError, Unprocessable
from ..mindsdb.agent_answers import ANSWER_KEY
from ..services import agents as agent_service
from .agent import tool_set_of
from .protocol import ToolSet


class ModelEndpointFailed(QuarryError):
    """The model endpoint could not be reached, answered an error, or never answered."""

    status = 502
    title = "Model endpoint failed"


@dataclass
class Endpoint:
    base_url: str
    model: str
    api_key: str | None

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
             timeout_s: float) -> dict[str, Any]:
        """One chat-completions call; the assistant's message."""
        body = {"model": self.model, "messages": messages, "stream": False}
        if tools:
            body["tools"] = tools
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.base_url.rstrip("/") + "/chat/completions"
        request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=max(timeout_s, 0.1)) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise self._failed(f"answered HTTP {exc.code}{_error_message(exc)}") from None
        except TimeoutError:
            raise self._failed("did not answer in time") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise self._failed(f"cannot be reached ({reason})") from None
        except ValueError:
            raise self._failed("answered something that is not JSON") from None
        try:
            return answer["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise self._failed("answered without choices[0].message") from None

    def _failed(self, what: str) -> ModelEndpointFailed:
        # Named by its URL and model: the key stays out of every message.
        return ModelEndpointFailed(f"The model endpoint {self.base_url} (model {self.model}) "
                                   f"{what}")


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The ``error.message`` of an OpenAI-style error answer, if it is one. Nothing else of
    the body is repeated: an agent's author chooses the URL, and an answer must not become a
    way to read what another server on Quarry's network says."""
    try:
        message = json.loads(exc.read(64 * 1024))["error"]["message"]
    except (ValueError, KeyError, TypeError, OSError):
        return ""
    return f": {message[:200]}" if isinstance(message, str) else ""


@dataclass
class Completion:
    answer: str
    statements: list[dict[str, Any]] = field(default_factory=list)


def endpoint_of(view: dict[str, Any]) -> Endpoint:
    """The agent's model endpoint, or a 422 saying how to set one."""
    config = current_app.config
    model = view.get("model") if isinstance(view.get("model"), dict) else {}
    params = view.get("params") if isinstance(view.get("params"), dict) else {}

    def pick(*keys: str) -> Any:
        for source in (model, params):
            for key in keys:
                if isinstance(source.get(key), str) and source[key]:
                    return source[key]
        return None

    base_url = pick("base_url", "openai_api_base", "api_base") or config["LLM_BASE_URL"]
    name = pick("model_name", "model") or config["LLM_MODEL"]
    if not base_url or not name:
        raise Unprocessable(
            f"Agent {view['name']} has no model endpoint: give it one with PUT "
            f".../agents/{view['name']} and {{\"agent\": {{\"model\": {{\"base_url\": "
            "\"http://host:port/v1\", \"model_name\": \"…\", \"api_key\": \"…\"}}}} "
            "(any OpenAI-compatible server), or set QUARRY_LLM_BASE_URL and "
            "QUARRY_LLM_MODEL for every agent", title="No model endpoint")
    api_key = pick("api_key", "openai_api_key") or config["LLM_API_KEY"] or None
    return Endpoint(base_url, name, api_key)


def _conversation(view: dict[str, Any], messages: list[dict[str, Any]]
                  ) -> list[dict[str, Any]]:
    prompt = view.get("prompt_template") or (
        "You answer questions about data. Use the tools to run SQL; answer from their "
        "results, briefly. Every statement is read-only.")
    chat: list[dict[str, Any]] = [{"role": "system", "content": prompt}]
    for number, message in enumerate(messages, 1):
        if message.get("question"):
            chat.append({"role": "user", "content": str(message["question"])})
        # Earlier turns carry their answers; the last one is the question being asked.
        if message.get("answer") and number < len(messages):
            chat.append({"role": "assistant", "content": str(message["answer"])})
    return chat


def _openai_tools(tool_set: ToolSet) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.input_schema}}
            for t in tool_set.list_tools()]


def steps(project: str, agent_name: str, messages: list[dict[str, Any]]
          ) -> Iterator[dict[str, Any]]:
    """The loop, as events: one per statement run ({"type": "statement", …}), then the
    answer ({"type": "answer", "answer", "statements"}). A missing agent (404) or endpoint
    (422) is raised here, before the first event, so that a stream starts only when it
    can run."""
    view = agent_service.agent_for_use(project, agent_name)  # its API key in clear
    if not (messages[-1].get("question") or "").strip():
        raise Unprocessable("The last message must hold the question to answer: "
                            "{\"question\": \"…\", \"answer\": null}",
                            title="No question", errors={"messages": [
                                "The last message must hold the question to answer."]})
    endpoint = endpoint_of(view)
    tool_set = tool_set_of(view, project)
    return _loop(endpoint, tool_set, _conversation(view, messages))


def _loop(endpoint: Endpoint, tool_set: ToolSet, chat: list[dict[str, Any]]
          ) -> Iterator[dict[str, Any]]:
    tools = _openai_tools(tool_set)
    config = current_app.config
    deadline = time.monotonic() + config["AGENT_TIMEOUT_S"]
    ran: list[dict[str, Any]] = []
    for _ in range(config["AGENT_MAX_STEPS"]):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        reply = endpoint.chat(chat, tools, left)
        calls = reply.get("tool_calls") or []
        if not calls:
            yield {"type": "answer", "answer": reply.get("content") or "", "statements": ran}
            return
        chat.append({"role": "assistant", "content": reply.get("content"),
                     "tool_calls": calls})
        for call in calls:
            record, text = _run_call(tool_set, call)
            ran.append(record)
            yield {"type": "statement", **record}
            chat.append({"role": "tool", "tool_call_id": call.get("id"), "content": text})
    raise ModelEndpointFailed(
        f"The model did not answer within {config['AGENT_MAX_STEPS']} steps and "
        f"{config['AGENT_TIMEOUT_S']:g} s (QUARRY_AGENT_MAX_STEPS, QUARRY_AGENT_TIMEOUT_S); "
        f"statements run: {len(ran)}", title="Model did not answer")


def _run_call(tool_set: ToolSet, call: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Run one tool call; its record (tool, query, rows or error) and the text for the model."""
    function = call.get("function") or {}
    name = str(function.get("name") or "")
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = None
    record: dict[str, Any] = {"tool": name}
    if not isinstance(arguments, dict):
        record["error"] = "The tool call's arguments are not a JSON object"
        return record, record["error"]
    if isinstance(arguments.get("query"), str):
        record["query"] = arguments["query"]
    result = tool_set.call_tool(name, arguments)
    text = result.content[0].text if result.content else ""
    if result.is_error:
        record["error"] = text
    else:
        table = result.structured_content or {}
        record["rows"] = len(table.get("rows") or [])
        record["truncated"] = bool(table.get("truncated"))
    return record, text


def complete(project: str, agent_name: str, messages: list[dict[str, Any]]) -> Completion:
    """The agent's answer to the last question of ``messages``."""
    for event in steps(project, agent_name, messages):
        if event["type"] == "answer":
            return Completion(event["answer"], event["statements"])
    raise AssertionError("the loop ends with an answer or an error")  # pragma: no cover


def init_completions(app: Flask) -> None:
    """Let SQL (``SELECT answer FROM p.agent WHERE question = …``) reach the loop."""
    app.extensions[ANSWER_KEY] = complete
