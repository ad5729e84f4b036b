"""Pane 1, the scope tree: one node per scope and operator, marked busy or done."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from viz.model import Address, Model, View
from viz.tui.adapter import tree_label, walk


class TreePane:
    """The scope tree's widget and its nodes, kept across redraws so that folds and the cursor stay put."""

    def __init__(self) -> None:
        """A tree with no nodes yet."""
        self.nodes: dict[Address, TreeNode[Address]] = {}
        """The node on screen for each scope's or operator's address."""

    def compose(self) -> ComposeResult:
        """The tree widget, without its root."""
        tree: Tree[Address] = Tree("dataflows", id="scope-tree")
        tree.show_root = False
        tree.guide_depth = 2
        yield tree

    def refresh(self, tree: Tree[Address], model: Model, view: View) -> None:
        """Add the nodes built since the last redraw, relabel the others, and remove those a replay went back before."""
        nodes = self.nodes
        present = set()
        for info in walk(model):
            present.add(info.address)
            label_text, busy = tree_label(model, view, info)
            label = Text()
            label.append("● " if busy else "✓ ", style="bold yellow" if busy else "green")
            label.append(label_text, style="" if busy else "dim")
            node = nodes.get(info.address)
            if node is None:
                parent = tree.root if len(info.address) == 1 else nodes.get(info.address[:-1], tree.root)
                later = [child for child in parent.children if child.data is not None and child.data > info.address]
                before = later[0] if later else None
                if info.is_scope:
                    node = parent.add(label, data=info.address, expand=True, before=before)
                else:
                    node = parent.add(label, data=info.address, allow_expand=False, before=before)
                nodes[info.address] = node
            elif node.label != label:
                node.set_label(label)
            if info.is_scope and not node.allow_expand:
                node.allow_expand = True
        # a replay moved back before these operators were built: their rows would show a later state
        stale = {address for address in nodes if address not in present}
        for address in stale:
            node = nodes.pop(address)
            if not any(address[:depth] in stale for depth in range(1, len(address))):
                node.remove()  # with its children, which are stale too
