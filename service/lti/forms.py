"""The LTI dashboard's form (Flask-WTF, with its CSRF token like the other forms)."""

from __future__ import annotations

from wtforms import StringField, SubmitField, TextAreaField
from wtforms.validators import URL, DataRequired, Length, Optional

from service.web.forms import Form


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
