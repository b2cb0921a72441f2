"""The web forms (Flask-WTF: every one carries a CSRF token)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import (
    MultipleFileField,
    PasswordField,
    SelectField,
    SelectMultipleField,
    StringField,
    SubmitField,
    TextAreaField,
)
from wtforms.validators import URL, DataRequired, EqualTo, Length, Optional, Regexp
from wtforms.widgets import CheckboxInput, ListWidget

ROLE_CHOICES = ["student", "instructor"]


class Form(FlaskForm):  # type: ignore[misc]  # flask_wtf ships no type hints
    """The base of the forms below."""


class LoginForm(Form):
    username = StringField("User name", validators=[DataRequired(), Length(max=64)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=256)])
    submit = SubmitField("Log in")


class SubmitForm(Form):
    files = MultipleFileField("Upload .py files, one .ipynb notebook or one .zip")
    code = TextAreaField("…or paste your code", validators=[Optional(),
                                                            Length(max=256 * 1024)])
    filename = StringField("File name for pasted code", validators=[
        Optional(), Length(max=100),
        Regexp(r"^[A-Za-z_][A-Za-z0-9_]*\.py$", message="a Python file name such as mha.py")])
    submit = SubmitField("Submit for grading")


class ButtonForm(Form):
    """A form that is only a button (log out, regrade, revoke): the CSRF token is the point."""

    submit = SubmitField("Go")


class PasswordForm(Form):
    current = PasswordField("Current password", validators=[DataRequired(), Length(max=256)])
    new = PasswordField("New password", validators=[DataRequired(), Length(min=8, max=256)])
    again = PasswordField("New password again", validators=[
        DataRequired(), EqualTo("new", message="the two new passwords differ")])
    submit = SubmitField("Change password")


class TokenForm(Form):
    name = StringField("Token name", validators=[DataRequired(), Length(max=64)])
    submit = SubmitField("Create token")


class EnrolForm(Form):
    username = StringField("User name", validators=[DataRequired(), Length(max=64)])
    role = SelectField("Role", choices=ROLE_CHOICES)
    submit = SubmitField("Enrol")


class NewUserForm(Form):
    username = StringField("User name", validators=[
        DataRequired(), Length(max=64), Regexp(r"^[A-Za-z0-9_.@-]+$",
                                               message="letters, digits and _ . @ - only")])
    display_name = StringField("Display name", validators=[Optional(), Length(max=128)])
    role = SelectField("Role in the course", choices=ROLE_CHOICES)
    submit = SubmitField("Create and enrol")


class WebhookForm(Form):
    url = StringField("Endpoint URL", validators=[DataRequired(), Length(max=2048)])
    events = SelectMultipleField(
        "Events", choices=["submission.graded", "submission.failed"],
        default=["submission.graded", "submission.failed"],
        validators=[DataRequired(message="choose at least one event")],
        widget=ListWidget(prefix_label=False), option_widget=CheckboxInput())
    submit = SubmitField("Register webhook")


class PlatformForm(Form):
    name = StringField("Name", validators=[Optional(), Length(max=200)])
    issuer = StringField("Issuer (iss)", validators=[DataRequired(), Length(max=255)])
    client_id = StringField("Client id", validators=[DataRequired(), Length(max=255)])
    deployments = TextAreaField("Deployment ids (one a line)",
                                validators=[DataRequired(), Length(max=4000)])
    auth_login_url = StringField("Authentication (OIDC auth) URL", validators=[
        DataRequired(), URL(require_tld=False), Length(max=1024)])
    access_token_url = StringField("Access token URL", validators=[
        DataRequired(), URL(require_tld=False), Length(max=1024)])
    jwks_url = StringField("Platform JWKS URL", validators=[
        DataRequired(), URL(require_tld=False), Length(max=1024)])
    token_audience = StringField("Token audience (if not the token URL)", validators=[
        Optional(), Length(max=1024)])
    course = StringField("Map every LMS course to this course code (optional)",
                         validators=[Optional(), Length(max=64)])
    submit = SubmitField("Register platform")
