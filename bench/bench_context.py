"""Building a prompt's context for 10,000 messages vs 1,000 (target: at most 12x, i.e. linear); absolute times printed.

Measures `DialogManager.prompt_context`: reading the messages above the prompt from the document and
rendering them under the token budget, as `execute_prompt` does before calling the LLM."""
import statistics, tempfile, time
from pathlib import Path
from headlesnb import DialogManager
from headlesnb.llm import MockLLMClient

def setup(dm, name, n):
    dm.use_dialog(name, mode='create')
    out = '[{"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {}, "execution_count": 1}]'
    for i in range(n):
        kind = ('note', 'code', 'prompt')[i % 3]
        dm.add_message(f'message {i}: ' + 'words ' * 30, kind, dialog_name=name, **({'output': out} if kind == 'code' else {}))
    return dm.add_message('the question', 'prompt', dialog_name=name)['id']

if __name__ == '__main__':
    dm = DialogManager(Path(tempfile.mkdtemp()), llm=MockLLMClient(context_window=10_000_000))  # budget large enough to keep all
    ids = {n: setup(dm, f'd{n}', n) for n in (1000, 10_000)}
    ts = {n: [] for n in ids}
    for _ in range(5):
        for n, pid in ids.items():
            t = time.perf_counter(); ctx = dm.prompt_context(pid, dialog_name=f'd{n}'); ts[n].append(time.perf_counter() - t)
            if ctx.dropped: print(f'warning: {len(ctx.dropped)} messages dropped for the budget')
    dm.close_all()
    a, b = statistics.median(ts[1000]), statistics.median(ts[10_000])
    print(f'context for 1,000 messages:  median {a * 1e3:.1f} ms  (baseline)')
    print(f'context for 10,000 messages: median {b * 1e3:.1f} ms')
    print(f'ratio: {b / a:.1f}x  (target <= 12x)')
