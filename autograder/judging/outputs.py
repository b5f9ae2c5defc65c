"""A cell's outputs, collected from the kernel's messages within the cell's and the
notebook's caps, and the error outputs the grader writes itself."""

import json

import nbformat


class Outputs:
    """Collects a cell's outputs from iopub messages, within the cell's and notebook's caps."""

    def __init__(self, budget, cell_limit):
        self.outputs = []
        self.budget = budget  # shared dict: {"left": bytes left for the notebook}
        self.cell_left = cell_limit
        self.dropped = 0
        self.lost = False
        self.timed_out = False

    def _take(self, size):
        if size > self.budget["left"]:
            self.dropped += size
            return False
        self.budget["left"] -= size
        return True

    def __call__(self, message):
        kind, content = message["msg_type"], message.get("content", {})
        if kind == "timeout":
            self.timed_out = True
        elif kind == "lost":
            self.lost = True
        elif kind == "stream":
            text = str(content.get("text", ""))
            keep = text[: max(0, self.cell_left)]
            self.dropped += len(text) - len(keep)
            if keep and self._take(len(keep)):
                self.cell_left -= len(keep)
                name = "stderr" if content.get("name") == "stderr" else "stdout"
                if self.outputs and self.outputs[-1].output_type == "stream" and self.outputs[-1].name == name:
                    self.outputs[-1].text += keep
                else:
                    self.outputs.append(nbformat.v4.new_output("stream", name=name, text=keep))
        elif kind in ("display_data", "execute_result", "error"):
            size = len(json.dumps(content))
            if not self._take(size):
                return
            try:
                if kind == "error":
                    output = nbformat.v4.new_output("error", ename=str(content.get("ename", ""))[:500],
                                                    evalue=str(content.get("evalue", ""))[:5000],
                                                    traceback=[str(t)[:5000] for t in content.get("traceback", [])][:100])
                elif kind == "display_data":
                    output = nbformat.v4.new_output("display_data", data=content.get("data", {}),
                                                    metadata=content.get("metadata", {}))
                else:
                    output = nbformat.v4.new_output("execute_result", data=content.get("data", {}),
                                                    metadata=content.get("metadata", {}),
                                                    execution_count=content.get("execution_count"))
                nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[output])]))
            except Exception:
                self.dropped += size
                return
            self.outputs.append(output)
        elif kind == "clear_output":
            self.outputs = []

    def finish(self):
        if self.dropped or self.lost:
            amount = f"{self.dropped} characters of " if self.dropped and not self.lost else ""
            self.outputs.append(nbformat.v4.new_output(
                "stream", name="stdout", text=f"\n[the grader dropped {amount}output beyond its limits]\n"))
        return self.outputs


def grader_error(ename, evalue, traceback=None):
    """An error output written by the grader (a failed test's message, a crash, a limit)."""
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                  traceback=traceback or [f"{ename}: {evalue}"])
