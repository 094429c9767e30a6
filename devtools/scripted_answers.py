"""The scripted model's answers: a schema-valid output for each job type, built from the snapshot
and params in the prompt (``answer_for``), and the builders tests register for a type of their
own (Adding a job type, in docs/architecture.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["Builder", "answer_for", "forget_answer", "register_answer"]

_JOB_TYPE = re.compile(r"^job_type: ([\w-]+)$", re.MULTILINE)
_FENCED = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def _learning(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    answers = snapshot.get("answers") or []
    right = sum(1 for a in answers if a.get("correct"))
    ratio = right / len(answers) if answers else 0.5
    points = snapshot.get("knowledgePoints") or []
    level = (
        "novice"
        if ratio < 0.25
        else "developing"
        if ratio < 0.6
        else "proficient"
        if ratio < 0.9
        else "mastered"
    )
    return {
        "summary": f"Answered {right} of {len(answers)} questions correctly.",
        "masteryLevel": level,
        "strengths": [p["name"] for p in points if (p.get("mastery") or 0) >= 0.6][:20],
        "weaknesses": [p["name"] for p in points if (p.get("mastery") or 0) < 0.6][:20],
    }


def _weak_points(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    points = [p for p in snapshot.get("knowledgePoints") or [] if (p.get("mastery") or 0) < 0.6]
    return {
        "weakPoints": [
            {
                "knowledgePointId": p["id"],
                "title": p["name"],
                "reason": "Low mastery in recent answers.",
                "severity": "high" if (p.get("mastery") or 0) < 0.3 else "medium",
                "confidence": 70,
            }
            for p in points[:50]
        ]
    }


def _next_actions(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    points = snapshot.get("knowledgePoints") or [{"id": None, "name": "the material"}]
    return {
        "actions": [
            {
                "actionType": "review" if index == 0 else "practice",
                "title": f"Work on {p['name']}",
                "reason": "It is where the most progress can be made.",
                "knowledgePointId": p.get("id"),
                "priority": index,
            }
            for index, p in enumerate(points[:5])
        ]
    }


def _quiz(snapshot: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    title = (snapshot.get("material") or {}).get("title", "the material")
    count = int(params.get("count", 5))
    return {
        "questions": [
            {
                "questionType": "single_choice",
                "stem": f"Question {n + 1} about {title}?",
                "choices": [{"key": k, "text": f"Option {k}"} for k in "ABCD"],
                "answer": "A",
                "explanation": "Option A is what the material says.",
                "difficulty": "medium",
            }
            for n in range(count)
        ]
    }


def _cards(snapshot: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    title = (snapshot.get("material") or {}).get("title", "the material")
    return {
        "cards": [
            {"front": f"{title}: term {n + 1}", "back": f"Definition {n + 1}"}
            for n in range(int(params.get("count", 10)))
        ]
    }


Builder = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _echo(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    return {"echo": snapshot}


def _words(snapshot: dict[str, Any]) -> list[str]:
    return [w for w in str(snapshot.get("answer") or "").split() if len(w) > 3][:10]


def _recall(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    words = _words(snapshot)
    return {
        "score": min(100, 10 * len(words)),
        "recalledPoints": words[:5],
        "missedPoints": [] if len(words) >= 5 else ["the rest of the material"],
        "feedback": f"You recalled {len(words[:5])} key points.",
    }


def _feynman(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    words = _words(snapshot)
    return {
        "score": min(100, 10 * len(words)),
        "clarity": 80 if words else 20,
        "gaps": [] if words else ["the explanation is empty"],
        "misconceptions": [],
        "feedback": "A clear explanation in your own words." if words else "Explain it again.",
    }


_BUILDERS: dict[str, Builder] = {
    "active-recall": _recall,
    "feynman-evaluation": _feynman,
    "learning_state_analysis": _learning,
    "weak_point_analysis": _weak_points,
    "next_action_planning": _next_actions,
    "quiz_generation": _quiz,
    "flashcard_generation": _cards,
    "synthetic_echo": _echo,
}


def register_answer(job_type: str, builder: Builder) -> None:
    """Teach the server the answer of a job type it does not know (Adding a job type, in
    docs/architecture.md): ``builder(snapshot, params)`` returns a schema-valid output."""
    _BUILDERS[job_type] = builder


def forget_answer(job_type: str) -> None:
    _BUILDERS.pop(job_type, None)


def answer_for(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The schema-valid answer for the job the prompt describes."""
    system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
    user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
    match = _JOB_TYPE.search(system)
    blocks = _FENCED.findall(user)
    snapshot = json.loads(blocks[0]) if blocks else {}
    params = json.loads(blocks[1]) if len(blocks) > 1 else {}
    builder = _BUILDERS.get(
        match.group(1) if match else "synthetic_echo", _BUILDERS["synthetic_echo"]
    )
    return builder(snapshot, params)
