from django.urls import path

from inference import views

urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
]
