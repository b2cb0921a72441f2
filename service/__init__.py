"""The service: command line now; the Flask app, models and API come with the service issue."""
