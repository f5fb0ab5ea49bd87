"""Images an answer can carry, end to end (`python -m headlesnb.fronts.mcp` driven by the official client): bytes the model's
API would refuse are a line, not an image; an image too large to decode is not decoded (a 12000x12000 PNG took 1.1 GB of the
server per answer); one answer carries at most `IMAGES_PER_ANSWER` images, the rest named in a line. The file keeps them all."""
import base64, json, re

import pytest
from mcp.types import ImageContent, TextContent

from headlesnb.fronts.mcp_format import IMAGES_PER_ANSWER
from test_mcp import ok, run, stdio_session, text

pytestmark = pytest.mark.timeout(300)

SHOW = 'from IPython.display import display\nimport base64, io\nfrom PIL import Image\n'

def test_unreadable_and_undecodable_images_are_a_line(tmp_path):
    code = (SHOW + "display({'image/png': base64.b64encode(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(range(256)) * 10).decode()}, raw=True)\n"
            "b = io.BytesIO(); Image.new('1', (8000, 6000)).save(b, 'PNG'); display({'image/png': base64.b64encode(b.getvalue()).decode()}, raw=True)")
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            res = await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source=code))
            assert not res.is_error and not any(isinstance(b, ImageContent) for b in res.content), res.content
            t = text(res)
            assert re.search(r'\[image/png output of 3 KB not shown: it cannot be read as an image \(Pillow does not recognise its data', t), t
            assert re.search(r'\[image/png output, 8000x6000 \([\d,]+ KB\), not shown: over 24 megapixels, too large to downscale here; '
                             r'the full image: notebook://nb/cells/\w+/outputs/1\]', t), t
    run(main)
    outs = json.loads((tmp_path / 'nb.ipynb').read_text())['cells'][0]['outputs']
    assert [list(o['data']) for o in outs] == [['image/png'], ['image/png']]  # (the file keeps both as they came)

def test_an_answer_carries_at_most_so_many_images(tmp_path):
    code = SHOW + ("for i in range(20):\n    print('epoch', i)\n    b = io.BytesIO(); Image.new('RGB', (40, 30), (i, 0, 0)).save(b, 'PNG')\n"
                   "    display({'image/png': base64.b64encode(b.getvalue()).decode()}, raw=True)")
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            for tool, args in (('insert_execute_code_cell', dict(cell_index=-1, cell_source=code)), ('read_cell', dict(cell_index=0))):
                res = await s.call_tool(tool, args)
                assert sum(isinstance(b, ImageContent) for b in res.content) == IMAGES_PER_ANSWER, (tool, res.content)
                assert 'epoch 0' in text(res) and 'epoch 19' in text(res), text(res)
                assert re.search(r"\[… 12 images left out \(among outputs 9-31\): an answer shows at most 8, the first 4 and the last 4; "
                                 r"read_output\(cell_id='\w+', output_index=N, notebook_name='nb'\) shows image N …\]", text(res)), text(res)
            res = await s.call_tool('read_output', dict(cell_index=0, output_index=15, notebook_name='nb'))
            assert [type(b) for b in res.content] == [ImageContent], res.content  # one left out, read alone
    run(main)
    assert sum('image/png' in o.get('data', {}) for o in json.loads((tmp_path / 'nb.ipynb').read_text())['cells'][0]['outputs']) == 20

def test_gif_and_webp_go_as_images_and_their_resources_hold_the_bytes(tmp_path):
    "The model's API takes GIF and WebP: they went as their text/plain, and a WebP's resource held its base64 as text"
    code = SHOW + ("for fmt in ('GIF', 'WEBP'):\n    b = io.BytesIO(); Image.new('RGB', (30, 20), 'red').save(b, fmt)\n"
                   "    display({f'image/{fmt.lower()}': base64.b64encode(b.getvalue()).decode(), 'text/plain': '<Image>'}, raw=True)")
    async def main():
        async with stdio_session(tmp_path) as s:
            await ok(s, 'use_notebook', notebook_name='nb', mode='create')
            res = await s.call_tool('insert_execute_code_cell', dict(cell_index=-1, cell_source=code))
            assert [b.mime_type for b in res.content if isinstance(b, ImageContent)] == ['image/gif', 'image/webp'], res.content
            cid = json.loads((tmp_path / 'nb.ipynb').read_text())['cells'][0]['id']
            for i, magic in ((0, b'GIF8'), (1, b'RIFF')):
                [c] = (await s.read_resource(f'notebook://nb/cells/{cid}/outputs/{i}')).contents
                assert base64.b64decode(c.blob)[:4] == magic, c
    run(main)
