"""A job tree as people read it: depth first, each node under its parent."""

from __future__ import annotations

from shared.gen.aijob.v1 import job_service_pb2 as job_pb

__all__ = ["depth_first"]


def depth_first(tree: job_pb.GetJobTreeResponse) -> list[tuple[int, job_pb.TreeNode]]:
    """The tree's nodes depth first, each with its depth (the root at 0)."""
    below: dict[str, list[job_pb.TreeNode]] = {}
    for node in tree.nodes:
        below.setdefault(node.parent_job_id, []).append(node)
    ids = {node.job_id for node in tree.nodes}
    roots = [node for node in tree.nodes if node.parent_job_id not in ids]
    rows: list[tuple[int, job_pb.TreeNode]] = []
    stack = [(0, node) for node in reversed(roots)]
    while stack:
        depth, node = stack.pop()
        rows.append((depth, node))
        stack.extend((depth + 1, child) for child in reversed(below.get(node.job_id, [])))
    return rows
