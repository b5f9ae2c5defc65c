"""The HTML exporter of feedback pages: nbconvert's, without its BeautifulSoup pass.

nbconvert's HTMLExporter parses every page it writes with BeautifulSoup to add alt text
to images and make cells focusable: half the time of a feedback page. This exporter
makes the same changes to the same generated markup with patterns (configured as
`GenerateFeedback.exporter_class` in course_directory.py).
"""

import re

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

_IMG_WITHOUT_ALT = re.compile(r"<img(?![^>]*\salt=)")
_FOCUSABLE = re.compile(r'(<div class="[^"]*\bjp-(?:Cell-inputWrapper|OutputArea-output)\b[^"]*")(?![^>]*tabindex)')


class FeedbackExporter(HTMLExporter):
    def from_notebook_node(self, nb, resources=None, **kw):
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        self.register_filter("highlight_code", self.filters.get(
            "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        html = _IMG_WITHOUT_ALT.sub('<img alt="No description has been provided for this image"', html)
        html = _FOCUSABLE.sub(r'\1 tabindex="0"', html)
        return html, resources
