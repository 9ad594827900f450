from analytics.decide import Facts, Reply, decide, is_confirmation


def _strong(**kw):
    return Reply(kind="answer", strength="strong", path="generated", **kw)


def test_strong_answer_without_handoff_or_complaint_is_resolved():
    verdict = decide(Facts(replies=[_strong()]))
    assert (verdict.kind, verdict.codes, verdict.answered) == (
        "resolved",
        ["strong_evidence"],
        True,
    )


def test_handoff_wins_over_strong_evidence_and_keeps_its_reason():
    verdict = decide(Facts(replies=[_strong()], handoff_reasons=["high_risk", "weak_evidence"]))
    assert (verdict.kind, verdict.handoff_reason) == ("handed_off", "high_risk")
    assert verdict.codes == ["handoff", "strong_evidence"]


def test_agent_owner_without_handoff_row_is_an_agent_takeover():
    verdict = decide(Facts(replies=[_strong()], human_owner=True))
    assert (verdict.kind, verdict.handoff_reason) == ("handed_off", "agent_takeover")


def test_not_helpful_rating_makes_a_strong_answer_unresolved_and_unanswered():
    verdict = decide(Facts(replies=[_strong(rating="not_helpful")]))
    assert (verdict.kind, verdict.codes[0], verdict.answered) == (
        "unresolved",
        "not_helpful",
        False,
    )


def test_no_reply_at_all_is_abandoned_even_with_a_handoff_notice_only():
    assert decide(Facts()).kind == "abandoned"
    assert decide(Facts(replies=[Reply(kind="notice")])).kind == "abandoned"


def test_weak_and_declined_replies_are_unresolved_with_what_they_were():
    verdict = decide(Facts(replies=[Reply(kind="clarify"), Reply(kind="refusal")]))
    assert (verdict.kind, verdict.codes) == ("unresolved", ["declined", "weak_evidence"])


def test_completed_action_resolves():
    verdict = decide(Facts(replies=[Reply(kind="action")], actions_succeeded=1))
    assert (verdict.kind, verdict.codes) == ("resolved", ["action_completed"])


def test_action_that_did_not_complete_is_unresolved():
    verdict = decide(Facts(replies=[Reply(kind="action")]))
    assert (verdict.kind, verdict.codes) == ("unresolved", ["action_not_completed"])


def test_customer_confirmation_counts_as_evidence_for_a_weak_answer():
    thanked = decide(Facts(replies=[Reply(kind="clarify")], thanked_after_answer=True))
    clicked = decide(Facts(replies=[Reply(kind="extractive", rating="helpful")]))
    assert (thanked.kind, thanked.codes) == ("resolved", ["customer_confirmed"])
    assert (clicked.kind, clicked.codes) == ("resolved", ["customer_confirmed"])


def test_cached_answer_counts_as_strong_evidence():
    verdict = decide(Facts(replies=[Reply(kind="answer", path="cached")]))
    assert verdict.codes == ["strong_evidence"]


def test_thank_you_replies_confirm_but_complaints_and_questions_do_not():
    for text in ("Thanks!", "thank you so much", "That helped, cheers", "Perfect."):
        assert is_confirmation(text), text
    for text in (
        "Thanks, but it still doesn't work",
        "thanks? where is it",
        "I need a refund",
        "Thanks " + "x" * 90,
    ):
        assert not is_confirmation(text), text
