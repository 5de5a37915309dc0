"""Reading rendered HTML in tests.

``start_tags(html_text)``: every start tag of an HTML fragment, in order, as
(tag, {attribute: value}) pairs, for checking that only the expected markup was rendered.
"""

from html.parser import HTMLParser


class TagCollector(HTMLParser):
    """Collects (tag, attrs) for every start tag fed to it."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def start_tags(html_text: str) -> list[tuple[str, dict]]:
    p = TagCollector()
    p.feed(html_text)
    p.close()
    return p.tags
