# Written as makemigrations writes it, with SimHashExtension first.

import pgsimhash.django
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = []

    operations = [
        pgsimhash.django.SimHashExtension(),
        migrations.CreateModel(
            name="Batch",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("body", models.TextField()),
                ("fp", pgsimhash.django.SimHash64Field(null=True)),
            ],
        ),
        migrations.CreateModel(
            name="Doc",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("body", models.TextField()),
                ("fp", models.GeneratedField(db_persist=True, expression=pgsimhash.django.Minhash64("body"),
                                             output_field=pgsimhash.django.SimHash64Field())),
            ],
            options={
                "indexes": [pgsimhash.django.SimHashIndex(fields=["fp"], name="doc_fp_simhash")],
            },
        ),
    ]
