"""Images pasted into a dialog reach the model: a Solveit prompt with a pasted PNG, through the real anthropic SDK
against the local fake Messages API (audit finding #3 of the dialogs)."""
import base64, io, json
from PIL import Image
from aidialog.dialog import Dialog
from aidialog.ipynb import read_ipynb, write_ipynb
from fake_anthropic import FakeAnthropic
from headlesnb import DialogManager
from headlesnb.llm import AnthropicClient

def test_a_pasted_png_goes_as_an_image_block_and_the_dialog_keeps_it(tmp_path):
    buf = io.BytesIO(); Image.new('RGB', (40, 40), 'blue').save(buf, 'PNG'); png = buf.getvalue()
    dlg = Dialog(name='pics')  # written by aidialog's own writer: the prompt's attachment in the notebook metadata
    p = dlg.mk_message('look at this picture ![p](attachment:p1.png)', msg_type='prompt'); p.mk_attachment(png, 'image/png', 'p1.png')
    write_ipynb(dlg, tmp_path/'pics.ipynb')
    written = json.loads((tmp_path/'pics.ipynb').read_text())
    with FakeAnthropic(replies=['A blue square.']) as fake:
        dm = DialogManager(tmp_path, llm=AnthropicClient(api_key='test', base_url=fake.url), save_delay=0)
        dm.use_dialog('pics')
        assert dm.execute_prompt(p.id)['reply'] == 'A blue square.'
        dm.save(); dm.close_all()
    sent = fake.requests[-1]['messages'][-1]['content']
    assert [b['type'] for b in sent] == ['text', 'image'], sent
    assert sent[1]['source'] == {'type': 'base64', 'media_type': 'image/png', 'data': base64.b64encode(png).decode()}
    after = json.loads((tmp_path/'pics.ipynb').read_text())
    assert after['metadata'] == written['metadata']  # the attachment where aidialog wrote it
    back = read_ipynb(tmp_path/'pics.ipynb').messages[0]
    assert [(a.id, a.content_type, a.data) for a in back.attachments] == [('p1.png', 'image/png', png)]
    assert back.output[0]['data']['text/markdown'] == 'A blue square.'
