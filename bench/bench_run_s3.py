"""A 10-cell notebook read from and written to `s3://` (moto's S3 server, started here on 127.0.0.1) against the same run on
local files (target: at most 1.5x), in-process and on `-k python3`.

Whole `headlesnb run` processes, alternately, 5 times each (HEADLESNB_BENCH_ROUNDS); medians printed with the load average.
With HEADLESNB_BENCH_PYCACHE=1 the processes use compiled bytecode (a cache in a temporary folder, filled by a first run), as
after `pip install`; without it they run as this environment does (with PYTHONDONTWRITEBYTECODE=1 every import compiles).
This process's headlesnb is the one the runs use (PYTHONPATH)."""
import os, signal, socket, statistics, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from bench_run_warm import make_nb, timed

if __name__ == '__main__':
    rounds = int(os.environ.get('HEADLESNB_BENCH_ROUNDS', 5))
    d = Path(tempfile.mkdtemp())
    make_nb(d / 'in.ipynb', 1)
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    srv = subprocess.Popen(['moto_server', '-H', '127.0.0.1', '-p', str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try: socket.create_connection(('127.0.0.1', port), 0.2).close(); break
            except OSError: time.sleep(0.1)
        env = {**os.environ, 'AWS_ACCESS_KEY_ID': 'bench', 'AWS_SECRET_ACCESS_KEY': 'bench-secret', 'AWS_ENDPOINT_URL': f'http://127.0.0.1:{port}',
               'AWS_DEFAULT_REGION': 'us-east-1', 'PYTHONPATH': str(Path(__import__('headlesnb').__file__).parents[1])}
        if os.environ.get('HEADLESNB_BENCH_PYCACHE'):
            env.pop('PYTHONDONTWRITEBYTECODE', None); env['PYTHONPYCACHEPREFIX'] = str(d / 'pycache')
        import s3fs
        fs = s3fs.S3FileSystem(key='bench', secret='bench-secret', endpoint_url=f'http://127.0.0.1:{port}')
        fs.mkdir('bench'); fs.put(str(d / 'in.ipynb'), 'bench/in.ipynb')
        hb = [sys.executable, '-m', 'headlesnb.fronts.cli', 'run']
        for kernel in ('inprocess', 'python3'): timed([*hb, 's3://bench/in.ipynb', 's3://bench/out.ipynb', '-k', kernel], env=env)  # (warm-up)
        print(f"bytecode: {'compiled, cached' if 'PYTHONPYCACHEPREFIX' in env else 'as this environment has it'}")
        import importlib.util  # (which fsspec file system serves s3:// with the credentials in the environment: see headlesnb.fronts.run_io)
        print(f"s3:// through: {'obstore' if importlib.util.find_spec('obstore') else 's3fs (obstore is not installed)'}")
        print(f'load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the machine may be shared)')
        for kernel in ('inprocess', 'python3'):
            local = [*hb, str(d / 'in.ipynb'), str(d / 'out.ipynb'), '-k', kernel]
            remote = [*hb, 's3://bench/in.ipynb', 's3://bench/out.ipynb', '-k', kernel]
            tl, tr = [], []
            for _ in range(rounds): tl.append(timed(local, env=env)); tr.append(timed(remote, env=env))
            ml, mr = statistics.median(tl), statistics.median(tr)
            print(f'-k {kernel}: s3:// in and out: median {mr:.2f} s  {["%.2f" % t for t in tr]}')
            print(f'-k {kernel}: local files:      median {ml:.2f} s  {["%.2f" % t for t in tl]}  (baseline)')
            print(f'-k {kernel}: ratio {mr / ml:.2f}x local  (target <= 1.5x)')
        print(f'load average after: {os.getloadavg()[0]:.1f}')
    finally:
        srv.send_signal(signal.SIGTERM); srv.wait(10)
