"""add_message on a 2000-message dialog vs a 10-message dialog (target: at most 2x); medians of interleaved rounds."""
import statistics, tempfile, time
from pathlib import Path
from headlesnb import DialogManager

def dialog(dm, name, n):
    dm.use_dialog(name, mode='create')
    for i in range(n): dm.add_message(f'message {i}\n' + 'text ' * 20, 'note' if i % 2 else 'code', dialog_name=name)
    dm.save(name)

if __name__ == '__main__':
    dm = DialogManager(Path(tempfile.mkdtemp()))  # default save_delay: saves are coalesced in the background
    dialog(dm, 'small', 10); dialog(dm, 'big', 2000)
    ts = {'small': [], 'big': []}
    for _ in range(10):
        for name in ts:
            for _ in range(50):
                t = time.perf_counter(); dm.add_message('one more note', 'note', dialog_name=name); ts[name].append(time.perf_counter() - t)
    dm.close_all()
    s, b = (statistics.median(ts[k]) * 1e6 for k in ('small', 'big'))
    print(f'add_message, 10-message dialog:   median {s:.0f} us  (baseline, {len(ts["small"])} adds)')
    print(f'add_message, 2000-message dialog: median {b:.0f} us  ({len(ts["big"])} adds)')
    print(f'ratio: {b / s:.2f}x  (target <= 2x)')
