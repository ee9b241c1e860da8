"""Snapshots of fairshare: the share trees with every account's use and
priority, and the charges of running jobs (fair groups are written with the
other groups; see :mod:`xce_core._snapshot`, which calls :func:`write_shares` and
:func:`load_shares`).

Trees are stored node by node, not as the ``ShareTree`` they were built from:
accounts made on first use (``default`` users, users without shares) and the
ids every node was given are part of what orders jobs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from xce_core._fairshare import Fairshare, ShareNode, ShareTreeState
from xce_core._model import Job
from xce_core._snapshot_format import NodeRecord, SharesRecord, TreeRecord

__all__ = ["load_shares", "write_shares"]


def _nodes(tree: ShareTreeState) -> Iterator[ShareNode]:
    """Root first, then breadth first, children in order."""
    queue = [tree.root]
    for node in queue:
        yield node
        queue.extend(node.children)


def write_shares(fairshare: Fairshare, job_index: Mapping[str, int]) -> SharesRecord:
    trees: list[TreeRecord] = []
    scoped: list[tuple[str, str, ShareTreeState | None]] = [
        ("cluster", "", fairshare.cluster),
        ("implicit", "", fairshare._implicit),
        *(("queue", name, tree) for name, tree in fairshare.queues.items()),
    ]
    known: set[int] = set()
    for scope, queue, tree in scoped:
        if tree is None:
            continue
        nodes = []
        for node in _nodes(tree):
            known.add(node.uid)
            nodes.append(
                NodeRecord(
                    node.uid,
                    -1 if node.parent is None else node.parent.uid,
                    node.name,
                    node.shares,
                    node.level,
                    node.default,
                    [(user, child.uid) for user, child in node.users.items()],
                    [(sorted(members), child.uid) for members, child in node.members],
                    node.slots,
                    node.usage,
                    node.frozen,
                    node.stamp,
                    node.priority,
                )
            )
        trees.append(TreeRecord(scope, queue, tree.where, nodes))
    return SharesRecord(
        trees=trees,
        next_uid=fairshare._uids.next,
        running=[
            (job_index[job.job_id], account.uid, slots)
            for job, (account, slots) in fairshare.running.items()
        ],
        # Risen accounts of a replaced tree have no group left to lift.
        risen=sorted(node.uid for node in fairshare._risen if node.uid in known),
        recalculated=fairshare.recalculated,
        used=fairshare.used,
    )


def load_shares(
    record: SharesRecord, fairshare: Fairshare, jobs: list[Job]
) -> dict[int, ShareNode]:
    """Rebuild ``fairshare``'s trees, accounts and charges; the nodes by uid."""
    nodes: dict[int, ShareNode] = {}
    for tree_record in record.trees:
        tree = ShareTreeState.__new__(ShareTreeState)
        tree.where = tree_record.where
        tree._uids = fairshare._uids
        tree._groups = {}
        tree._every = None
        for n in tree_record.nodes:
            parent = nodes[n.parent] if n.parent >= 0 else None
            node = ShareNode(n.name, n.shares, parent, n.uid)
            node.level = n.level
            node.default = n.default
            node.slots, node.usage, node.frozen = n.slots, n.usage, n.frozen
            node.stamp, node.priority = n.stamp, n.priority
            if n.uid in nodes:
                raise ValueError(f"share node {n.uid} twice")
            nodes[n.uid] = node
            if parent is None:
                tree.root = node
            else:
                parent.children.append(node)
        for n in tree_record.nodes:
            node = nodes[n.uid]
            node.users = {user: nodes[uid] for user, uid in n.users}
            node.members = [(frozenset(members), nodes[uid]) for members, uid in n.members]
        match tree_record.scope:
            case "cluster":
                fairshare.cluster = tree
            case "implicit":
                fairshare._implicit = tree
            case _:
                fairshare.queues[tree_record.queue] = tree
    fairshare.by_origin = {}  # accounts of the trees restored, found afresh
    fairshare._uids.next = record.next_uid
    fairshare.running = {jobs[index]: (nodes[uid], slots) for index, uid, slots in record.running}
    fairshare._risen = {nodes[uid] for uid in record.risen}
    fairshare.recalculated = record.recalculated
    fairshare.used = record.used
    return nodes
