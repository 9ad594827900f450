"""FAQ questions an HTML page marks only by their place (divs, paragraphs, "Q:"/"A:")."""

from knowledge.chunking import chunk_document
from knowledge.extraction import HTML, MARKDOWN, extract


def _blocks(body: str) -> list[tuple[int, str]]:
    html = f"<html><head><title>Page</title></head><body>{body}</body></html>"
    result = extract(data=html.encode(), content_type=HTML)
    return [(b.level, b.text) for b in result.blocks]


ACCORDION = (
    "<main><h1>Help</h1><h2>Account</h2>"
    "<div class='faq'><div class='faq-q'>How do I reset my password?</div>"
    "<div class='faq-a'>Click <a href='/reset'>Forgot password</a> on the sign-in page.</div></div>"
    "<div class='faq'><div class='faq-q'>Can I change my email?</div>"
    "<div class='faq-a'>Yes, under Settings. It takes a minute.</div></div>"
    "<div class='faq'><div class='faq-q'>Can two people share one account?</div>"
    "<div class='faq-a'><p>No.</p><p>Each person needs a login of their own.</p></div></div>"
    "<h2>Billing</h2><p>Invoices are emailed monthly.</p></main>"
)


def test_questions_in_divs_head_their_answers_one_level_below_the_section():
    assert _blocks(ACCORDION) == [
        (1, "Help"),
        (2, "Account"),
        (3, "How do I reset my password?"),
        (0, "Click Forgot password on the sign-in page."),
        (3, "Can I change my email?"),
        (0, "Yes, under Settings. It takes a minute."),
        (3, "Can two people share one account?"),
        (0, "No."),
        (0, "Each person needs a login of their own."),
        (2, "Billing"),
        (0, "Invoices are emailed monthly."),
    ]


def test_a_question_heading_makes_its_answer_a_passage_under_it():
    html = f"<html><body>{ACCORDION}</body></html>".encode()
    chunks = chunk_document(extract(data=html, content_type=HTML))
    login = next(c for c in chunks if "login of their own" in c.text)
    assert login.heading_path[-1] == "Can two people share one account?"


def test_q_and_a_in_one_paragraph_split_into_the_question_and_its_answer():
    assert _blocks(
        "<main><h1>FAQ</h1><p>Q: Do you ship abroad?<br>A: Yes, to 30 countries.</p>"
        "<p><b>Q: How long does it take?</b><br/>A: <i>Five</i> to ten days.</p>"
        "<p>Question: Is it tracked? Answer: Always.</p></main>"
    ) == [
        (1, "FAQ"),
        (2, "Do you ship abroad?"),
        (0, "Yes, to 30 countries."),
        (2, "How long does it take?"),
        (0, "Five to ten days."),
        (2, "Is it tracked?"),
        (0, "Always."),
    ]


def test_questions_in_prose_stay_paragraphs():
    """Two rhetorical questions are not a list of entries; a question over another question
    or over a heading answers nothing; a paragraph that asks after a sentence is prose."""
    assert _blocks(
        "<main><h1>Why backups?</h1><p>Why does this matter?</p><p>Disks fail.</p>"
        "<p>What if the office burns?</p><p>Keep a copy elsewhere.</p>"
        "<p>Is this enough? Usually.</p><p>Any questions?</p><h2>Next</h2><p>Done.</p></main>"
    ) == [
        (1, "Why backups?"),
        (0, "Why does this matter?"),
        (0, "Disks fail."),
        (0, "What if the office burns?"),
        (0, "Keep a copy elsewhere."),
        (0, "Is this enough? Usually."),
        (0, "Any questions?"),
        (2, "Next"),
        (0, "Done."),
    ]
    questions = "".join(f"<p>Question {n}?</p>" for n in range(5))
    assert _blocks(f"<main><h1>Open questions</h1>{questions}<p>None answered.</p></main>") == [
        (1, "Open questions"),
        *[(0, f"Question {n}?") for n in range(5)],  # only the last is over an answer
        (0, "None answered."),
    ]


def _md_blocks(text: str) -> list[tuple[int, str]]:
    result = extract(data=text.encode(), content_type=MARKDOWN)
    return [(b.level, b.text) for b in result.blocks]


def test_markdown_bold_questions_and_q_a_paragraphs_head_their_answers():
    assert _md_blocks(
        "# Help\n\n## Account\n\n**How do I reset my password?**\n\nClick *Forgot password*.\n\n"
        "**Can I change my email?**\n\nYes, under Settings.\n\n"
        "Q: Can two people share one account?\nA: No, each needs a login.\n"
    ) == [
        (1, "Help"),
        (2, "Account"),
        (3, "How do I reset my password?"),
        (0, "Click Forgot password."),
        (3, "Can I change my email?"),
        (0, "Yes, under Settings."),
        (3, "Can two people share one account?"),
        (0, "No, each needs a login."),
    ]


def test_raw_html_in_markdown_is_read_not_dropped():
    assert _md_blocks(
        "# FAQ\n\n<details>\n<summary>Do you ship abroad?</summary>\n\n"
        "Yes, to **30** countries.\n\n</details>\n\n"
        "<p>Call us on 555-0100.<br>We answer 9-5.</p>\n\n"
        "Line one<br>line two, and a hard  \nbreak.\n"
    ) == [
        (1, "FAQ"),
        (2, "Do you ship abroad?"),
        (0, "Yes, to 30 countries."),
        (0, "Call us on 555-0100. We answer 9-5."),
        (0, "Line one line two, and a hard break."),
    ]


def test_a_paragraph_that_only_labels_a_note_opens_the_note():
    # CUPS: a bold "Note:" in a blockquote over the note's paragraph; Sphinx: the box's title
    body = (
        "<h1>Moving a job</h1><p>The lpmove command moves a job:</p><pre>lpmove 12 bar</pre>"
        "<BLOCKQUOTE><B>Note:</B>\n\n<P>The lpmove command is in /usr/sbin.</P></BLOCKQUOTE>"
        "<div class='admonition warning'><p class='admonition-title'>Warning</p>"
        "<p>Moving a held job releases it.</p></div>"
        "<p>Note that this is prose, not a label.</p>"
    )
    assert _blocks(body) == [
        (1, "Moving a job"),
        (0, "The lpmove command moves a job:"),
        (0, "lpmove 12 bar"),
        (0, "Note: The lpmove command is in /usr/sbin."),
        (0, "Warning: Moving a held job releases it."),
        (0, "Note that this is prose, not a label."),
    ]


def test_a_label_over_code_a_heading_or_nothing_stays_as_it_is():
    body = (
        "<h1>Setup</h1><p><b>See also:</b></p><pre>man lpadmin</pre>"
        "<p>Tip</p><h2>Next</h2><p>Text.</p><p>Note:</p>"
    )
    assert [text for _, text in _blocks(body)] == [
        "Setup",
        "See also:",
        "man lpadmin",
        "Tip",
        "Next",
        "Text.",
        "Note:",
    ]


def test_a_markdown_note_label_opens_its_paragraph():
    text = b"# Printing\n\n**Note:**\n\nDuplex needs a duplex unit.\n\nMore text.\n"
    result = extract(data=text, content_type=MARKDOWN)
    assert [b.text for b in result.blocks] == [
        "Printing",
        "Note: Duplex needs a duplex unit.",
        "More text.",
    ]


# A troubleshooting page (Podman's troubleshooting.md): each entry's parts under headings of
# their own.
TROUBLESHOOTING = b"""# Troubleshooting

## Common issues

### 1) Cannot pull images

A pull fails with an odd error.

#### Symptom

```
$ podman pull fedora
error: no registries configured
```

#### Solution

Create /etc/containers/registries.conf from the packaged default.

### 2) Build hangs

#### Cause:

The user id is very large.

#### Workaround

Pass --log-rotate=false to useradd.
"""


def test_part_headings_of_a_troubleshooting_entry_label_their_parts_inside_the_entry():
    result = extract(data=TROUBLESHOOTING, content_type=MARKDOWN)
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Troubleshooting"),
        (2, "Common issues"),
        (3, "1) Cannot pull images"),
        (0, "A pull fails with an odd error."),
        (0, "Symptom:"),
        (0, "$ podman pull fedora\nerror: no registries configured"),
        (0, "Solution: Create /etc/containers/registries.conf from the packaged default."),
        (3, "2) Build hangs"),
        (0, "Cause: The user id is very large."),
        (0, "Workaround: Pass --log-rotate=false to useradd."),
    ]
    # the symptom and its solution are one section: the entry's heading is over both
    chunks = chunk_document(result)
    solution = next(c for c in chunks if "registries.conf" in c.text)
    assert solution.heading_path[-1] == "1) Cannot pull images"
    assert "no registries configured" in solution.text


def test_html_part_headings_label_their_parts_and_a_page_opening_on_one_keeps_it():
    body = (
        "<h2>Printer offline</h2><h3>Problem</h3><p>Jobs stay queued.</p>"
        "<h3>Resolution</h3><p>Run cupsenable.</p><h3>Printing from phones</h3><p>Use IPP.</p>"
    )
    assert _blocks(body) == [
        (1, "Page"),
        (2, "Printer offline"),
        (0, "Problem: Jobs stay queued."),
        (0, "Resolution: Run cupsenable."),
        (3, "Printing from phones"),
        (0, "Use IPP."),
    ]
    # a part name that is all the page has above it is the page's heading, not a label
    assert _blocks("<h1>Solution</h1><p>We sell printers.</p>")[:2] == [
        (1, "Solution"),
        (0, "We sell printers."),
    ]
