"""Old console URLs keep working: the actions login/logout send to the one login (keeping
`next`), and the pages that moved into console/ answer at their old paths."""

import pytest
from django.test import Client
from django.urls import resolve

from supportbot.tests.factories import UserFactory


def test_the_old_actions_login_redirects_to_the_one_login_keeping_next(db):
    r = Client().get("/console/actions/login/?next=/console/actions/7/")
    assert r.status_code in (301, 302)
    assert r["Location"] == "/console/login/?next=%2Fconsole%2Factions%2F7%2F"


def test_the_one_login_then_goes_to_next(agent):
    r = Client().post(
        "/console/login/?next=/console/actions/",
        {"username": agent.username, "password": "pw-for-tests-1", "next": "/console/actions/"},
    )
    assert r.status_code == 302, r.content
    assert r["Location"] == "/console/actions/"


def test_the_old_actions_logout_logs_out_and_redirects_to_the_one_login(agent):
    client = Client()
    client.force_login(agent)
    r = client.post("/console/actions/logout/")
    assert r.status_code in (301, 302)
    assert r["Location"] == "/console/login/"
    assert client.get("/console/").status_code == 302  # logged out


def test_a_get_of_the_old_logout_only_redirects(agent):
    client = Client()
    client.force_login(agent)
    r = client.get("/console/actions/logout/?next=/console/")
    assert r.status_code in (301, 302)
    assert r["Location"] == "/console/login/?next=%2Fconsole%2F"
    assert client.get("/console/").status_code == 200  # no logout by a link (CSRF)


@pytest.mark.parametrize(
    ("path", "module"),
    [
        ("/console/ops/", "console.views_ops"),
        ("/console/ops/data.json", "console.views_ops"),
        ("/console/api/widget-secret", "console.api_widget"),
        ("/console/api/widget-secret/rotate", "console.api_widget"),
        ("/metrics", "inference.views"),
    ],
)
def test_moved_views_answer_at_their_old_paths(path, module):
    assert resolve(path).func.__module__ == module


def test_the_ops_page_still_opens_for_staff_at_its_old_path(client, db):
    client.force_login(UserFactory(username="operator", is_staff=True))
    r = client.get("/console/ops/")
    assert r.status_code == 200, r.content
    assert b"Inference pool" in r.content
