"""The profile's attribution of samples to parts of the turn."""

from bench.profile_turn import OTHER, WAITING, parse_collapsed, part_of

DAPHNE = "<module> (daphne/cli.py:1)"
CONSUMER = "handle (chat/consumers.py:80)"
QUERY = "execute (psycopg/cursor.py:700)"
SAMPLES = [
    (
        [
            CONSUMER,
            "_respond (chat/orchestrator/turn.py:9)",
            "search (knowledge/selectors/search.py:40)",
            QUERY,
        ],
        7,
    ),
    (
        [
            CONSUMER,
            "reply_save (conversations/services/messages.py:3)",
            "seal (supportbot/encryption.py:20)",
            QUERY,
        ],
        3,
    ),
    ([CONSUMER, "message_receive (conversations/services/messages.py:3)", QUERY], 5),
    (
        [
            "verify (verification/verifier.py:140)",
            "embed_tokens (knowledge/embeddings.py:114)",
            "run (onnxruntime/capi/session.py:220)",
        ],
        11,
    ),
    (["dataReceived (twisted/internet/tcp.py:1)"], 2),
]
RAW = "\n".join(
    [
        *(f"{';'.join([DAPHNE, *frames])} {count}" for frames, count in SAMPLES),
        "not a sample line",
        "_bootstrap (threading.py:1002);_worker (concurrent/futures/thread.py:81) 40",
        f"{DAPHNE};{CONSUMER};wait (psycopg/connection.py:495) 9",
        "<module> (x.py:1);run (somewhere/else.py:2) 1",
    ]
)


def test_a_sample_goes_to_the_first_part_any_of_its_frames_matches():
    profile = parse_collapsed(RAW)
    assert profile.total == 29
    assert profile.samples == {
        "search SQL": 7,  # the query is the search's, not a round trip of its own
        "encryption": 3,  # sealing before the write
        "database round trips": 5,
        "embedding the question": 11,  # the encoder inside the verifier is still the encoder
        "WebSocket and channel layer": 2,
        OTHER: 1,
        WAITING: 49,  # an idle pool thread, a query waiting for the server: not CPU
    }
    assert profile.leaves[QUERY] == 15


def test_a_stack_of_the_event_loop_alone_is_not_counted_as_a_part_of_the_turn():
    assert part_of(["_run_once (asyncio/base_events.py:1)"]) == "event loop and threads (other)"
    assert part_of(["<module> (x.py:1)"]) == OTHER
