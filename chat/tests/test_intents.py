import pytest

from chat.intents import detect, has_personal_data, normalize_question


@pytest.mark.parametrize(
    "text",
    [
        "Can I talk to a human?",
        "I want to speak with a real person",
        "agent",
        "connect me to someone please",
        "Representative please",
    ],
)
def test_asking_for_a_person_is_a_human_request(text):
    signal = detect(text)
    assert signal is not None
    assert signal.kind == "human_request"


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("I will contact my lawyer about this", "legal"),
        ("I'm going to file a chargeback", "chargeback"),
        ("my account was hacked and someone used my card", "account_compromise"),
        ("the heater caught fire in my tent", "safety"),
    ],
)
def test_high_risk_intents_are_detected_with_their_category(text, category):
    signal = detect(text)
    assert signal is not None
    assert (signal.kind, signal.detail) == ("high_risk", category)


def test_abuse_is_negative_sentiment():
    assert detect("this is the worst useless service").kind == "negative_sentiment"


@pytest.mark.parametrize(
    "text",
    [
        "How long does shipping take?",
        "What is your return policy for opened items?",
        "Does the agent of change jacket come in blue?",
    ],
)
def test_ordinary_questions_carry_no_signal(text):
    assert detect(text) is None


def test_personal_data_detection_and_normalization():
    assert has_personal_data("where is order A-1042")
    assert has_personal_data("mail me at a@b.co")
    assert not has_personal_data("How long do refunds take?")
    assert normalize_question("  How LONG do refunds take?? ") == "how long do refunds take"
