import pytest

from knowledge.names import question_names


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("will it still work after I upgrade to 4.2?", ["4.2"]),
        ("is v10.1.3 out yet", ["v10.1.3"]),
        ("does it run on win11", ["win11"]),
        ("Does it run on Windows without WSL?", ["windows", "wsl"]),
        ("does it run on WINDOWS", ["windows"]),  # odd casing inside a sentence
        ("how do I get the Starship prompt", ["starship"]),
        ("can i install it with oh-my-gadget", ["oh-my-gadget"]),
    ],
)
def test_versions_coined_and_capitalised_words_are_names(question, names):
    assert question_names(question) == names


def test_a_name_written_as_code_is_a_name_whatever_its_case():
    assert question_names("the forum says to run `brew install acme`, ok?") == [
        "brew",
        "install",
        "acme",
    ]
    assert question_names("does ``Choco`` work") == ["choco"]


def test_names_in_other_scripts_and_widths_are_read_the_same():
    assert question_names("ＷＳＬ２ support?") == ["wsl2"]  # full-width, as some keyboards type
    assert question_names("Does it run on Ubuntü?") == ["ubuntü"]


@pytest.mark.parametrize(
    "question",
    [
        # Ordinary words customers use instead of the documents' words: never names.
        "there is grey text appearing after my cursor, how do i get rid of it",
        "my folders have a space in the name",
        "all the colours are too much, how to switch them off",
        "ctrl-c stops the spell-correcting of my iron-on print",  # keys and compounds
        # Sentence starts, "I" and its contractions, shouting and titles carry no names.
        "Printing fails when I'm on the train. Returns take how long?",
        "HOW DO I PRINT TWO PAGES ON ONE SHEET",
        "How Do I Print Two Pages On One Sheet",
        # Counts, pages and the customer's own files are not names.
        "loop 5 times to make file_1.txt to file_5.txt",
        "go 10 pages forward",
        "",
    ],
)
def test_ordinary_words_counts_and_file_names_are_not_names(question):
    assert question_names(question) == []


def test_a_misspelt_name_is_still_a_name():
    assert question_names("how do i instal it on Windos 11?") == ["windos"]
